/**
 * `.oak/PERMISSIONS`: which principals may read which paths of a repository. Pure: the server reads
 * the file from `main`, parses it here, and asks the matcher about each path it is about to serve.
 *
 * The file is shaped like CODEOWNERS:
 *
 * ```
 * # comment
 * /secrets/          @acme/ops            # trailing comment (after whitespace)
 * *.pem              @alice @acme/security
 * /docs/public/      *
 * ```
 *
 * - One rule per line: a pattern (see Glob.ts: gitignore globs) then principals, separated by
 *   spaces or tabs. A `\` in the pattern escapes the next character, so `\ ` is a space in a name
 *   and `\#` a leading `#` (unlike GitHub's CODEOWNERS, where that escape does not work).
 * - A token starting with `#` begins a comment to the end of the line (a full line or a trailing
 *   comment after whitespace); `a#b` is a name. Blank lines are ignored; CRLF and a BOM are fine.
 * - Principals: `@user`, `@org/group` and `*` (everyone who can read the repository). Names are
 *   slugs; they are compared lowercase (`@Alice` is `@alice`).
 * - The last matching rule wins. A path no rule matches is unrestricted. A path whose last matching
 *   rule names the caller, one of the caller's groups, or `*` is granted; any other caller is not.
 *   Organization owners and admins read everything: that override is the caller's business (the
 *   server's), not this module's.
 *
 * Decisions (each problem is a warning with its line number; line 0 is the whole file):
 * - A rule whose principals are all malformed, or that has none, still restricts its paths and
 *   grants nobody: only owners and admins read them. Write `*` to open a path to every reader.
 * - Malformed principals are dropped from their rule (the rest of the rule stands).
 * - Lines that cannot be understood are ignored, as GitHub does for CODEOWNERS: a bad glob, a
 *   negation (`!pattern`, not supported, as in CODEOWNERS; `\!` is a name starting with `!`), a line
 *   longer than MAX_LINE_LENGTH.
 * - Whole-file limits fail closed: a file over MAX_FILE_BYTES, with more than MAX_RULES rules, or
 *   not UTF-8 puts the repository in `lockdown`: every path is restricted and nobody but owners and
 *   admins is granted, until the file is fixed. Dropping the excess instead could silently open
 *   paths that a later rule restricted.
 * - `valid` is true when there is no warning at all. The server enforces every file it parsed,
 *   warnings or not; `valid` tells the author the file reads as written.
 * - Whether a named user or group exists is not known here: `withUnknownPrincipals` adds those
 *   warnings once the server has looked the names up. Unknown names grant nothing (no caller holds them).
 */
import { checkSlugFormat } from "../Names.ts"
import { compileGlob, matchPrepared, preparePath } from "./Glob.ts"
import type { Glob, PreparedPath } from "./Glob.ts"

/** Where the server reads the file from, on `main`. */
export const PERMISSIONS_PATH = ".oak/PERMISSIONS"
/** In UTF-8 bytes. */
export const MAX_FILE_BYTES = 64 * 1024
/** In characters (UTF-16 code units); comment lines are exempt. */
export const MAX_LINE_LENGTH = 4096
export const MAX_RULES = 1000

export const EVERYONE = "*"

export type WarningCode =
  | "malformed_principal"
  | "unknown_principal"
  | "no_principal"
  | "bad_glob"
  | "negation"
  | "line_too_long"
  | "file_too_large"
  | "too_many_rules"
  | "not_utf8"

export interface PermissionsWarning {
  /** 1-based; 0 for the whole file. */
  readonly line: number
  readonly code: WarningCode
  readonly message: string
}

export interface PermissionsEntry {
  /** 1-based line number in the file. */
  readonly line: number
  /** The pattern as written (escapes included). */
  readonly pattern: string
  /** The valid principals, canonical (`@alice`, `@acme/eng`, `*`), without duplicates; may be empty. */
  readonly principals: ReadonlyArray<string>
}

/** A compiled rule; what the matcher walks. */
export interface PermissionsRule {
  readonly entry: PermissionsEntry
  readonly glob: Glob
  readonly everyone: boolean
  readonly grants: ReadonlySet<string>
}

export interface PermissionsFile {
  /** The rules in file order (the matcher walks them from the last). */
  readonly entries: ReadonlyArray<PermissionsEntry>
  /** Every distinct valid principal, in order of first appearance. */
  readonly principals: ReadonlyArray<string>
  /** Sorted by line. */
  readonly warnings: ReadonlyArray<PermissionsWarning>
  /** No warnings: the file reads exactly as written. */
  readonly valid: boolean
  /** A whole-file limit was exceeded: every path is restricted and nobody is granted. */
  readonly lockdown: boolean
  /** Compiled form of `entries` (not for JSON answers). */
  readonly rules: ReadonlyArray<PermissionsRule>
}

// ---------------------------------------------------------------------------------------------
// Principals

export type Principal =
  | { readonly kind: "everyone" }
  | { readonly kind: "user"; readonly user: string }
  | { readonly kind: "group"; readonly org: string; readonly group: string }

export type PrincipalResult =
  | { readonly ok: true; readonly principal: Principal; readonly canonical: string }
  | { readonly ok: false; readonly reason: string }

const quote = (text: string): string => `'${text.length > 80 ? `${text.slice(0, 80)}…` : text}'`

/** One principal token: `*`, `@user` or `@org/group` (case-insensitive, canonical lowercase). */
export const parsePrincipal = (token: string): PrincipalResult => {
  if (token === EVERYONE) return { ok: true, principal: { kind: "everyone" }, canonical: EVERYONE }
  if (!token.startsWith("@")) {
    if (token.includes("@")) {
      return { ok: false, reason: `${quote(token)} is not a principal: e-mail addresses are not accepted; write @username` }
    }
    return { ok: false, reason: `${quote(token)} is not a principal: expected @user, @org/group or *` }
  }
  const name = token.slice(1).toLowerCase()
  const parts = name.split("/")
  if (parts.length === 1) {
    const check = checkSlugFormat(parts[0]!, "user name")
    if (!check.ok) return { ok: false, reason: `${quote(token)} is not a valid @user: ${check.reason}` }
    return { ok: true, principal: { kind: "user", user: name }, canonical: `@${name}` }
  }
  if (parts.length === 2) {
    const org = checkSlugFormat(parts[0]!, "organization")
    if (!org.ok) return { ok: false, reason: `${quote(token)} is not a valid @org/group: ${org.reason}` }
    const group = checkSlugFormat(parts[1]!, "group")
    if (!group.ok) return { ok: false, reason: `${quote(token)} is not a valid @org/group: ${group.reason}` }
    return { ok: true, principal: { kind: "group", org: parts[0]!, group: parts[1]! }, canonical: `@${name}` }
  }
  return { ok: false, reason: `${quote(token)} is not a principal: expected @user or @org/group` }
}

// ---------------------------------------------------------------------------------------------
// Parsing

const isSpace = (ch: string): boolean => ch === " " || ch === "\t" || ch === "\f" || ch === "\v"

/** Whitespace-separated tokens, `\x` kept as written (the glob resolves escapes), stopping at a `#` token. */
const tokenize = (line: string): Array<string> => {
  const tokens: Array<string> = []
  let current = ""
  let inToken = false
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!
    if (isSpace(ch)) {
      if (inToken) tokens.push(current)
      current = ""
      inToken = false
      continue
    }
    if (!inToken && ch === "#") break
    inToken = true
    if (ch === "\\" && i + 1 < line.length) {
      current += ch + line[i + 1]!
      i++
    } else {
      current += ch
    }
  }
  if (inToken) tokens.push(current)
  return tokens
}

const emptyCompiled = { entries: [], principals: [], rules: [] } as const

const finish = (
  parts: { entries: ReadonlyArray<PermissionsEntry>; principals: ReadonlyArray<string>; rules: ReadonlyArray<PermissionsRule> },
  warnings: ReadonlyArray<PermissionsWarning>,
  lockdown: boolean
): PermissionsFile => {
  const sorted = [...warnings].sort((a, b) => a.line - b.line)
  return { ...parts, warnings: sorted, valid: sorted.length === 0, lockdown }
}

const lockdownFile = (code: WarningCode, message: string): PermissionsFile =>
  finish(emptyCompiled, [{ line: 0, code, message }], true)

const utf8Length = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      bytes += 4
      i++
    } else bytes += 3
  }
  return bytes
}

const tooLarge = (bytes: number): PermissionsFile =>
  lockdownFile(
    "file_too_large",
    `the file is ${bytes} bytes, over the limit of ${MAX_FILE_BYTES}: no rule is read and every path is restricted to organization owners and admins`
  )

/** Parses the file's text. Never fails: problems are warnings, and whole-file problems are a lockdown. */
export const parsePermissions = (content: string): PermissionsFile => {
  if (content.length > MAX_FILE_BYTES) return tooLarge(utf8Length(content))
  const bytes = utf8Length(content)
  if (bytes > MAX_FILE_BYTES) return tooLarge(bytes)
  const text = content.startsWith("\uFEFF") ? content.slice(1) : content
  const lines = text.split("\n")
  const entries: Array<PermissionsEntry> = []
  const rules: Array<PermissionsRule> = []
  const principals: Array<string> = []
  const seenPrincipals = new Set<string>()
  const warnings: Array<PermissionsWarning> = []

  for (let index = 0; index < lines.length; index++) {
    const line = index + 1
    const raw = lines[index]!.endsWith("\r") ? lines[index]!.slice(0, -1) : lines[index]!
    const warn = (code: WarningCode, message: string) => warnings.push({ line, code, message })
    const trimmed = raw.trimStart()
    if (trimmed.length === 0 || trimmed.startsWith("#")) continue
    if (raw.length > MAX_LINE_LENGTH) {
      warn("line_too_long", `line ${line} is ${raw.length} characters, over the limit of ${MAX_LINE_LENGTH}: the line is ignored`)
      continue
    }
    const tokens = tokenize(raw)
    const pattern = tokens[0]
    if (pattern === undefined) continue
    if (pattern.startsWith("!")) {
      warn(
        "negation",
        `line ${line}: negation ${quote(pattern)} is not supported (as in CODEOWNERS): the line is ignored; write '\\!' for a name starting with '!'`
      )
      continue
    }
    const compiled = compileGlob(pattern)
    if (!compiled.ok) {
      warn("bad_glob", `line ${line}: the pattern ${quote(pattern)} ${compiled.reason}: the line is ignored`)
      continue
    }
    if (rules.length === MAX_RULES) {
      return finish(
        { entries, principals, rules },
        [
          ...warnings,
          {
            line,
            code: "too_many_rules",
            message: `line ${line}: more than ${MAX_RULES} rules: every path is restricted to organization owners and admins until the file is shortened`
          }
        ],
        true
      )
    }
    const granted: Array<string> = []
    for (const token of tokens.slice(1)) {
      const parsed = parsePrincipal(token)
      if (!parsed.ok) {
        warn("malformed_principal", `line ${line}: ${parsed.reason}; it grants nothing`)
        continue
      }
      if (granted.includes(parsed.canonical)) continue
      granted.push(parsed.canonical)
      if (!seenPrincipals.has(parsed.canonical)) {
        seenPrincipals.add(parsed.canonical)
        principals.push(parsed.canonical)
      }
    }
    if (granted.length === 0) {
      warn(
        "no_principal",
        tokens.length === 1
          ? `line ${line}: the pattern ${quote(pattern)} names no principal: its paths are restricted to organization owners and admins (write * to open them to every reader)`
          : `line ${line}: the pattern ${quote(pattern)} has no valid principal: its paths are restricted to organization owners and admins`
      )
    }
    const entry: PermissionsEntry = { line, pattern, principals: granted }
    entries.push(entry)
    rules.push({ entry, glob: compiled.glob, everyone: granted.includes(EVERYONE), grants: new Set(granted) })
  }
  return finish({ entries, principals, rules }, warnings, false)
}

/** Parses the file's bytes as stored: the size is checked before decoding, and invalid UTF-8 is a lockdown. */
export const parsePermissionsBytes = (bytes: Uint8Array): PermissionsFile => {
  if (bytes.length > MAX_FILE_BYTES) return tooLarge(bytes.length)
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    return lockdownFile("not_utf8", "the file is not valid UTF-8: every path is restricted to organization owners and admins")
  }
  return parsePermissions(text)
}

/**
 * Adds an `unknown_principal` warning on every line naming a principal that `isKnown` rejects
 * (`*` is always known). The server looks up `file.principals` and passes the answer here.
 */
export const withUnknownPrincipals = (file: PermissionsFile, isKnown: (principal: string) => boolean): PermissionsFile => {
  const unknown = new Set(file.principals.filter((principal) => principal !== EVERYONE && !isKnown(principal)))
  if (unknown.size === 0) return file
  const added: Array<PermissionsWarning> = []
  for (const entry of file.entries) {
    for (const principal of entry.principals) {
      if (!unknown.has(principal)) continue
      const what = principal.includes("/") ? "group" : "user"
      added.push({
        line: entry.line,
        code: "unknown_principal",
        message: `line ${entry.line}: unknown ${what} ${principal}: it grants nothing`
      })
    }
  }
  return finish(file, [...file.warnings, ...added], file.lockdown)
}

// ---------------------------------------------------------------------------------------------
// Matching

/** Who is asking: the user's name (none for anonymous callers or service accounts) and their groups as `org/group`. */
export interface Caller {
  readonly user?: string | undefined
  readonly groups?: ReadonlyArray<string> | undefined
}

/** The caller as canonical principals (`@alice`, `@acme/eng`); `*` is implied for every caller. */
export const callerPrincipals = (caller: Caller): ReadonlySet<string> => {
  const held = new Set<string>()
  if (caller.user !== undefined && caller.user.length > 0) held.add(`@${caller.user.toLowerCase()}`)
  for (const group of caller.groups ?? []) held.add(`@${group.replace(/^@/, "").toLowerCase()}`)
  return held
}

export interface PathAccess {
  /** Some rule covers the path (or the file is in lockdown). */
  readonly restricted: boolean
  /** The caller may read the content: the path is unrestricted, or its rule names the caller, a group of theirs, or `*`. Owners and admins are the server's override. */
  readonly granted: boolean
  /** The last matching rule, if any (none for an unrestricted path or a lockdown). */
  readonly entry: PermissionsEntry | undefined
}

const UNRESTRICTED: PathAccess = { restricted: false, granted: true, entry: undefined }
const LOCKED: PathAccess = { restricted: true, granted: false, entry: undefined }

const lastMatch = (file: PermissionsFile, path: PreparedPath): PermissionsRule | undefined => {
  for (let i = file.rules.length - 1; i >= 0; i--) {
    const rule = file.rules[i]!
    if (matchPrepared(rule.glob, path)) return rule
  }
  return undefined
}

/** The rule that decides this path: the last one matching it. */
export const matchingEntry = (file: PermissionsFile, path: string): PermissionsEntry | undefined =>
  lastMatch(file, preparePath(path))?.entry

export const isRestricted = (file: PermissionsFile, path: string): boolean =>
  file.lockdown || lastMatch(file, preparePath(path)) !== undefined

/**
 * One checker per caller, for many paths (a zip, a pull): principals are resolved once and each
 * path is split once, then rules are tried from the last.
 */
export const accessChecker = (file: PermissionsFile, caller: Caller): (path: string) => PathAccess => {
  const held = callerPrincipals(caller)
  return (path) => {
    if (file.lockdown) return LOCKED
    if (file.rules.length === 0) return UNRESTRICTED
    const rule = lastMatch(file, preparePath(path))
    if (rule === undefined) return UNRESTRICTED
    let granted = rule.everyone
    if (!granted) {
      for (const principal of held) {
        if (rule.grants.has(principal)) {
          granted = true
          break
        }
      }
    }
    return { restricted: true, granted, entry: rule.entry }
  }
}

/** Whether `path` is restricted and whether `caller` is granted it. */
export const pathAccess = (file: PermissionsFile, path: string, caller: Caller): PathAccess => accessChecker(file, caller)(path)
