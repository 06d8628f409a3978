/**
 * Grove objects as git objects: blobs as they are, trees with git's modes and order, squash
 * commits with a synthesized ident. Ids are SHA-1 over `<type> <size>\0<body>`.
 */
import { createHash } from "node:crypto"
import { parseTimestamp } from "@grove/core/objects/Timestamp"
import type { EntryMode } from "@grove/core/objects/Tree"

export type GitObjectType = "commit" | "tree" | "blob"

/** Type codes of pack object headers. */
export const PACK_TYPE: Record<GitObjectType, number> = { commit: 1, tree: 2, blob: 3 }

export const GIT_MODE: Record<EntryMode, string> = {
  regular: "100644",
  executable: "100755",
  symlink: "120000",
  tree: "40000"
}

const utf8 = new TextEncoder()

export const objectHeader = (type: GitObjectType, size: number): Uint8Array => utf8.encode(`${type} ${size}\0`)

export const objectId = (type: GitObjectType, body: Uint8Array): string =>
  createHash("sha1").update(objectHeader(type, body.length)).update(body).digest("hex")

export interface GitTreeEntry {
  readonly name: string
  readonly mode: EntryMode
  /** Hex SHA-1 of the entry's git object. */
  readonly sha: string
}

// git orders entries by name bytes, a directory as if its name ended in "/".
const sortKey = (e: GitTreeEntry): Buffer => Buffer.from(e.mode === "tree" ? `${e.name}/` : e.name, "utf8")

/** A tree object's body: `<mode> <name>\0<20-byte id>` per entry, in git's order. */
export const encodeTree = (entries: ReadonlyArray<GitTreeEntry>): Uint8Array => {
  const sorted = entries.map((e) => ({ e, key: sortKey(e) })).sort((a, b) => Buffer.compare(a.key, b.key))
  return Buffer.concat(
    sorted.flatMap(({ e }) => [Buffer.from(`${GIT_MODE[e.mode]} ${e.name}\0`, "utf8"), Buffer.from(e.sha, "hex")])
  )
}

/** `name <email>`: characters git idents cannot hold are dropped, the email is made from the name. */
export const ident = (author: string): string => {
  const name = author.replace(/[<>\0\r\n]/g, "").trim() || "grove"
  const local = name.replace(/\s+/g, "-")
  return `${name} <${local}@grove>`
}

/** Whole epoch seconds of an RFC 3339 time (fractions dropped, times before 1970 clamped to 0). */
export const epochSeconds = (timestamp: string): number => {
  const ns = parseTimestamp(timestamp)
  if (ns === undefined || ns < 0n) return 0
  return Number(ns / 1_000_000_000n)
}

export const DEFAULT_MESSAGE = "Squash commit"

export interface GitCommit {
  readonly tree: string
  readonly parent: string | null
  readonly author: string
  readonly timestamp: string
  readonly message: string | null
}

export const encodeCommit = (commit: GitCommit): Uint8Array => {
  const who = `${ident(commit.author)} ${epochSeconds(commit.timestamp)} +0000`
  // NUL would end the object's text for git; a message always ends in a newline, as git writes them.
  const text = (commit.message ?? "").replace(/\0/g, "")
  const message = text.trim() === "" ? DEFAULT_MESSAGE : text
  const lines = [
    `tree ${commit.tree}`,
    ...(commit.parent === null ? [] : [`parent ${commit.parent}`]),
    `author ${who}`,
    `committer ${who}`,
    "",
    message.endsWith("\n") ? message : `${message}\n`
  ]
  return utf8.encode(lines.join("\n"))
}

/** A pack entry's header: type and size, 4 bits then 7 per byte, least significant first. */
export const packObjectHeader = (type: GitObjectType, size: number): Uint8Array => {
  const bytes: Array<number> = []
  let rest = Math.floor(size / 16)
  let byte = (PACK_TYPE[type] << 4) | (size % 16)
  while (rest > 0) {
    bytes.push(byte | 0x80)
    byte = rest % 128
    rest = Math.floor(rest / 128)
  }
  bytes.push(byte)
  return Uint8Array.from(bytes)
}
