/**
 * Trees: one level of a directory, hashed over a canonical text form so every client and the
 * server agree on the hash.
 */
import type { NameCheck } from "../Names.ts"
import { checkHash } from "../Names.ts"
import { hash } from "./Blake3Backend.ts"
import type { Hash } from "./Blake3Backend.ts"
import type { TreeEntry } from "./TreeText.ts"
import { checkTreeEntries, encodeTree } from "./TreeText.ts"

export * from "./TreeText.ts"

const ok: NameCheck = { ok: true }
const fail = (reason: string): NameCheck => ({ ok: false, reason })

export const hashTree = (entries: ReadonlyArray<TreeEntry>): Hash => hash(encodeTree(entries))

/** A tree as received: its entries must be valid and hash to the claimed hash. */
export const checkTree = (tree: { readonly hash: string; readonly entries: ReadonlyArray<TreeEntry> }): NameCheck => {
  const claimed = checkHash(tree.hash, "tree hash")
  if (!claimed.ok) return claimed
  const entries = checkTreeEntries(tree.entries)
  if (!entries.ok) return fail(`tree ${tree.hash}: ${entries.reason}`)
  const computed = hashTree(tree.entries)
  return computed === tree.hash ? ok : fail(`tree hash mismatch: claimed ${tree.hash}, computed ${computed}`)
}
