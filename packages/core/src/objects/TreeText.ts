/**
 * Trees' entries and their canonical text form (names, modes, encode/decode), without hashing: no Effect and no
 * BLAKE3 backend are loaded with it, so the client's quick paths (cli NoopPush.ts, SmallPush.ts) read stored trees
 * before the client loads. `Tree.ts` re-exports all of it with the hashing.
 */
import type { NameCheck } from "../Names.ts"
import { checkHash, hasControlCharacters } from "../Names.ts"

type Hash = string

export type EntryKind = "tree" | "blob"
export type BlobMode = "regular" | "executable" | "symlink"
export type EntryMode = BlobMode | "tree"

export interface TreeEntry {
  readonly name: string
  readonly kind: EntryKind
  readonly hash: Hash
  readonly mode: EntryMode
}

const ok: NameCheck = { ok: true }
const fail = (reason: string): NameCheck => ({ ok: false, reason })

export const isEntryKind = (value: unknown): value is EntryKind => value === "tree" || value === "blob"

export const isBlobMode = (value: unknown): value is BlobMode =>
  value === "regular" || value === "executable" || value === "symlink"

/** Longest entry name, in UTF-8 bytes: what common file systems (ext4, APFS, NTFS in UTF-16 units) allow for one name. */
export const MAX_ENTRY_NAME_BYTES = 255

const utf8Length = (value: string): number => {
  let n = 0
  for (const ch of value) {
    const c = ch.codePointAt(0)!
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4
  }
  return n
}

/**
 * The canonical form's own rule (the sync protocol's): one path segment, so no `/`, no control
 * characters (`\t`, `\n`, `\0`... would break the canonical lines), not `.` or `..`, not empty.
 * Stored trees are read back with this rule only, so objects stored before the stricter rule stay readable.
 */
export const checkWireEntryName = (name: string): NameCheck => {
  if (name.length === 0) return fail("entry name must not be empty")
  if (name === "." || name === "..") return fail(`entry name must not be '${name}'`)
  if (name.includes("/")) return fail("entry name must not contain '/'")
  if (hasControlCharacters(name)) return fail("entry name must not contain control characters")
  if (!name.isWellFormed()) return fail("entry name must be valid Unicode")
  return ok
}

/** Code points HFS+ ignores when comparing names (git's `next_hfs_char`): `.g\u200Cit` is `.git` there. */
const HFS_IGNORED = /[\u200C-\u200F\u202A-\u202E\u206A-\u206F\uFEFF]/gu

/** `name` is `.<base>` (or the NTFS short name `<short>~N`) once case, HFS+ ignorables and NTFS trailing spaces, dots or streams are set aside. */
const isDotFile = (name: string, base: string, shortNames: ReadonlyArray<string>): boolean => {
  if (name.replace(HFS_IGNORED, "").toLowerCase() === `.${base}`) return true
  const lower = name.toLowerCase()
  const prefix = [`.${base}`, ...shortNames].find((p) => lower.startsWith(p))
  if (prefix === undefined) return false
  for (const c of lower.slice(prefix.length)) {
    if (c === ":" || c === "\\" || c === "/") return true
    if (c !== "." && c !== " ") return false
  }
  return true
}

/**
 * Whether a checkout would treat the name as `.git` somewhere, as git's `is_hfs_dotgit` and
 * `is_ntfs_dotgit` decide: any case; HFS+ ignorable code points anywhere; on NTFS, the short name
 * `git~1`, and trailing spaces or dots or an alternate data stream (`.git ::$INDEX_ALLOCATION`).
 */
export const isDotGit = (name: string): boolean => isDotFile(name, "git", ["git~1"])

/**
 * Only a name holding `grove` (in any case) or an HFS+ ignorable (which may split it) can be `.grove`: no other code
 * point lower-cases to an ASCII letter of it (Tree.test checks them all), so a name in any other script costs one test.
 */
const MAYBE_GROVE = new RegExp(`grove|${HFS_IGNORED.source}`, "i")

/**
 * `.grove` as a checkout's file system could take it (any case, HFS+ ignorable code points, NTFS aliases): grove keeps
 * a checkout's config (remote, key), state, index and objects there, and its walk skips a `.grove` at any depth, so no
 * tree may hold one anywhere (as git refuses `.git`).
 */
export const isDotGrove = (name: string): boolean => MAYBE_GROVE.test(name) && isDotFile(name, "grove", ["grove~1"])

/** False when no segment of `text` (paths joined by any separator) can be `.grove`: one test for a whole list. */
export const mayHoldDotGrove = (text: string): boolean => MAYBE_GROVE.test(text)

/**
 * The start of `path` (`/`-separated) up to its first segment a checkout takes for `.grove` (`d/.GROVE` of
 * `d/.GROVE/x`), or undefined for none. One regular expression test for most paths: a clone checks every file.
 */
export const dotGroveIn = (path: string): string | undefined => {
  if (!mayHoldDotGrove(path)) return undefined
  for (let start = 0; ;) {
    const end = path.indexOf("/", start)
    if (isDotGrove(end < 0 ? path.slice(start) : path.slice(start, end))) return end < 0 ? path : path.slice(0, end)
    if (end < 0) return undefined
    start = end + 1
  }
}

/** `.gitmodules` as git's fsck recognizes it (a symlink of that name is an fsck error). */
export const isDotGitmodules = (name: string): boolean => isDotFile(name, "gitmodules", [
  ...[1, 2, 3, 4].map((n) => `gitmod~${n}`),
  ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => `gi7eba~${n}`)
])

/**
 * A name every checkout can write safely: the wire rule, and what `git fsck` refuses (`.git` in any
 * case and its HFS+/NTFS aliases), no backslash (a directory separator on Windows, which git refuses
 * too) and at most MAX_ENTRY_NAME_BYTES bytes of UTF-8. Every tree a client sends must pass this.
 */
export const checkEntryName = (name: string): NameCheck => {
  const wire = checkWireEntryName(name)
  if (!wire.ok) return wire
  if (name.includes("\\")) return fail(`entry name ${JSON.stringify(name.slice(0, 80))} must not contain '\\'`)
  if (isDotGit(name)) return fail(`entry name ${JSON.stringify(name.slice(0, 80))} is reserved: git treats it as '.git'`)
  if (utf8Length(name) > MAX_ENTRY_NAME_BYTES) return fail(`entry name must be at most ${MAX_ENTRY_NAME_BYTES} bytes of UTF-8`)
  return ok
}

/** Blobs carry a file mode; trees carry the literal mode `tree`. */
export const checkEntryMode = (kind: unknown, mode: unknown): NameCheck => {
  if (kind === "tree") return mode === "tree" ? ok : fail("a tree entry's mode must be 'tree'")
  if (kind === "blob") {
    return isBlobMode(mode) ? ok : fail("a blob entry's mode must be 'regular', 'executable' or 'symlink'")
  }
  return fail("entry kind must be 'tree' or 'blob'")
}

/** Byte order of the UTF-8 encodings, which is code point order (UTF-16 code unit order differs above U+FFFF). */
export const compareNames = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i) ?? 0
    const y = b.codePointAt(i) ?? 0
    if (x !== y) return x - y
    if (x > 0xffff) i++ // same astral code point in both: skip its low surrogate
  }
  return a.length - b.length
}

/**
 * Every rule for one tree's entries: names, kinds, modes, hashes, and unique names (which also stops a
 * file and a directory sharing a path). `checkName` is checkEntryName for what arrives, checkWireEntryName
 * for what was stored.
 */
export const checkTreeEntries = (entries: ReadonlyArray<TreeEntry>, checkName: (name: string) => NameCheck = checkEntryName): NameCheck => {
  const seen = new Set<string>()
  for (const entry of entries) {
    const name = checkName(entry.name)
    if (!name.ok) return name
    const mode = checkEntryMode(entry.kind, entry.mode)
    if (!mode.ok) return fail(`${mode.reason} ('${entry.name}')`)
    if (checkName === checkEntryName && entry.mode === "symlink" && isDotGitmodules(entry.name)) {
      return fail(`'${entry.name}' must not be a symlink (git refuses a symlinked .gitmodules)`)
    }
    const h = checkHash(entry.hash, `hash of '${entry.name}'`)
    if (!h.ok) return h
    if (seen.has(entry.name)) return fail(`duplicate entry name '${entry.name}'`)
    seen.add(entry.name)
  }
  return ok
}

/** Entries sorted by name, the order of the canonical form. */
export const sortEntries = (entries: ReadonlyArray<TreeEntry>): Array<TreeEntry> =>
  [...entries].sort((a, b) => compareNames(a.name, b.name))

/** `kind\tname\thash\tmode` per entry, sorted by name, joined by `\n`, no trailing newline; empty tree = "". Entries must pass checkTreeEntries. */
export const encodeTree = (entries: ReadonlyArray<TreeEntry>): string => encodeSortedTree(sortEntries(entries))

/** `encodeTree` of entries already in canonical order (`sortEntries`): no second sort. */
export const encodeSortedTree = (sorted: ReadonlyArray<TreeEntry>): string =>
  sorted.map((e) => `${e.kind}\t${e.name}\t${e.hash}\t${e.mode}`).join("\n")

/** The entries of a stored canonical tree (the inverse of encodeTree); undefined if the text is not canonical. */
export const decodeTree = (body: string): ReadonlyArray<TreeEntry> | undefined => {
  if (body === "") return []
  const entries: Array<TreeEntry> = []
  for (const line of body.split("\n")) {
    const [kind, name, hash, mode, extra] = line.split("\t")
    if (extra !== undefined || kind === undefined || name === undefined || hash === undefined || mode === undefined) return undefined
    if (!isEntryKind(kind)) return undefined
    entries.push({ name, kind, hash, mode: mode as EntryMode })
  }
  return checkTreeEntries(entries, checkWireEntryName).ok ? entries : undefined
}
