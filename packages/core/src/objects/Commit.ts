/**
 * Commit hashing and the rules a commit's own fields must follow. The hash covers the fields
 * joined by `\n`, which is why branch names and authors may not contain `\n` (nor `\t`, `\0`).
 */
import type { NameCheck } from "../Names.ts"
import { checkHash, hash } from "./Blake3.ts"
import type { Hash } from "./Blake3.ts"
import { formatTimestamp, parseTimestamp } from "./Timestamp.ts"

export interface CommitFields {
  readonly branch_name: string
  readonly parent_hash: Hash | null
  readonly merge_parent_hash?: Hash | null | undefined
  /** Root tree hash. */
  readonly manifest_hash: Hash
  readonly author: string
  readonly message?: string | null | undefined
  /** Epoch nanoseconds (see Timestamp.parseTimestamp). */
  readonly timestamp: bigint
}

const ok: NameCheck = { ok: true }
const fail = (reason: string): { readonly ok: false; readonly reason: string } => ({ ok: false, reason })

const SEPARATORS = /[\n\t\0]/

/** Branch names travel percent-encoded in paths, so `/` and spaces are fine; they must be non-empty and free of `\n`, `\t`, `\0`. */
export const checkBranchName = (name: string): NameCheck => {
  if (name.length === 0) return fail("branch name must not be empty")
  if (SEPARATORS.test(name)) return fail("branch name must not contain newline, tab or NUL")
  if (!name.isWellFormed()) return fail("branch name must be valid Unicode")
  return ok
}

export const checkAuthor = (author: string): NameCheck => {
  if (SEPARATORS.test(author)) return fail("author must not contain newline, tab or NUL")
  if (!author.isWellFormed()) return fail("author must be valid Unicode")
  return ok
}

/** The hashed text: branch, parent, merge parent, manifest, author, message, chrono RFC 3339 timestamp, joined by `\n`; absent fields are "". */
export const encodeCommit = (c: CommitFields): string =>
  [
    c.branch_name,
    c.parent_hash ?? "",
    c.merge_parent_hash ?? "",
    c.manifest_hash,
    c.author,
    c.message ?? "",
    formatTimestamp(c.timestamp)
  ].join("\n")

/** Fields must pass checkCommitFields first. */
export const hashCommit = (c: CommitFields): Hash => hash(encodeCommit(c))

/** A commit as it arrives on the wire (timestamp still a string). */
export interface CommitWireFields {
  readonly hash: string
  readonly branch_name: string
  readonly parent_hash: string | null
  readonly merge_parent_hash?: string | null | undefined
  readonly manifest_hash: string
  readonly author: string
  readonly message?: string | null | undefined
  readonly timestamp: string
}

export type CommitCheck =
  | { readonly ok: true; readonly fields: CommitFields }
  | { readonly ok: false; readonly reason: string }

/** Every field rule, then the recomputed hash must equal the claimed one. */
export const checkCommit = (c: CommitWireFields): CommitCheck => {
  const checks = [
    checkHash(c.hash, "commit hash"),
    checkBranchName(c.branch_name),
    c.parent_hash === null ? ok : checkHash(c.parent_hash, "parent_hash"),
    c.merge_parent_hash == null ? ok : checkHash(c.merge_parent_hash, "merge_parent_hash"),
    checkHash(c.manifest_hash, "manifest_hash"),
    checkAuthor(c.author),
    c.message == null || c.message.isWellFormed() ? ok : fail("message must be valid Unicode")
  ]
  for (const check of checks) if (!check.ok) return check
  const timestamp = parseTimestamp(c.timestamp)
  if (timestamp === undefined) return fail(`timestamp '${c.timestamp}' is not an RFC 3339 time in years 0000-9999`)
  const fields: CommitFields = {
    branch_name: c.branch_name,
    parent_hash: c.parent_hash,
    merge_parent_hash: c.merge_parent_hash ?? null,
    manifest_hash: c.manifest_hash,
    author: c.author,
    message: c.message ?? null,
    timestamp
  }
  const computed = hashCommit(fields)
  if (computed !== c.hash) return fail(`commit hash mismatch: claimed ${c.hash}, computed ${computed}`)
  return { ok: true, fields }
}
