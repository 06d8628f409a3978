/**
 * Rules for every name that reaches a URL path or the database: user names,
 * organization slugs, repository names and key names. Pure checks returning a
 * reason string, so the edge can answer 400 with a clear message.
 */

/** Slugs that would shadow fixed paths under `{base_url}` or `{site_url}`. */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set([
  "api", "api-keys", "admin", "assets", "cli-auth", "login", "logout", "new", "openapi.json", "operations", "orgs",
  "releases", "repos", "settings", "sites", "static", "version", "whoami", "health", "grove", "explore", "user", "users",
  // The Oak client posts its feedback to /api/feature-requests/cli (answered in oak-client/OakClientRoutes.ts).
  "feature-requests"
])

// oxlint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/u

export const hasControlCharacters = (value: string): boolean => CONTROL.test(value)

export type NameCheck = { readonly ok: true } | { readonly ok: false; readonly reason: string }

const ok: NameCheck = { ok: true }
const fail = (reason: string): NameCheck => ({ ok: false, reason })

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,37}[a-z0-9])?$/

export const MAX_SLUG = 39

/**
 * The shape of a slug: what an existing user name or organization slug can look like. Reserved
 * slugs have this shape too (they can only never be created), so a path naming one is simply not found.
 */
export const checkSlugFormat = (value: string, what = "slug"): NameCheck => {
  if (value.length === 0) return fail(`${what} must not be empty`)
  if (value.length > MAX_SLUG) return fail(`${what} must be at most ${MAX_SLUG} characters`)
  if (hasControlCharacters(value)) return fail(`${what} must not contain control characters`)
  if (!SLUG.test(value)) {
    return fail(`${what} may contain only lowercase letters, digits and inner hyphens, starting and ending with a letter or digit`)
  }
  if (value.includes("--")) return fail(`${what} must not contain consecutive hyphens`)
  return ok
}

/** User names and organization slugs share one namespace (a user's personal organization is named after them). */
export const checkSlug = (value: string, what = "slug"): NameCheck => {
  const format = checkSlugFormat(value, what)
  if (!format.ok) return format
  if (RESERVED_SLUGS.has(value)) return fail(`${what} '${value}' is reserved`)
  return ok
}

const REPO_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/

export const MAX_REPO_NAME = 100

export const checkRepoName = (value: string): NameCheck => {
  if (value.length === 0) return fail("repository name must not be empty")
  if (value.length > MAX_REPO_NAME) return fail(`repository name must be at most ${MAX_REPO_NAME} characters`)
  if (hasControlCharacters(value)) return fail("repository name must not contain control characters")
  if (/\s/u.test(value)) return fail("repository name must not contain whitespace")
  if (value.includes("/") || value.includes("\\")) return fail("repository name must not contain '/' or '\\'")
  if (value === "." || value === ".." || value.includes("..")) return fail("repository name must not be '.' or contain '..'")
  if (value.startsWith(".")) return fail("repository name must not start with '.'")
  if (value.toLowerCase().endsWith(".git")) return fail("repository name must not end with '.git'")
  if (!REPO_NAME.test(value)) return fail("repository name may contain only letters, digits, '.', '_' and '-'")
  return ok
}

/** In UTF-16 code units, as JavaScript counts (a name of astral characters holds fewer characters). */
export const MAX_BRANCH_NAME = 255

/**
 * Branch names, however the branch is made (the create endpoint, a push): the sync protocol's rule
 * (non-empty, no newline, tab or NUL: they would break the commit hash) and, beyond it, no other
 * control character, valid Unicode and a bounded length. `/`, spaces and other Unicode are fine:
 * branch names travel percent-encoded in paths. The create endpoint also refuses names that start
 * or end with whitespace; a push may bring such a name, so paths accept it.
 */
export const checkBranchName = (value: string): NameCheck => {
  if (value.length === 0) return fail("branch name must not be empty")
  if (value.length > MAX_BRANCH_NAME) return fail(`branch name must be at most ${MAX_BRANCH_NAME} characters`)
  if (/[\n\t\0]/.test(value)) return fail("branch name must not contain newline, tab or NUL")
  if (hasControlCharacters(value)) return fail("branch name must not contain control characters")
  if (!value.isWellFormed()) return fail("branch name must be valid Unicode")
  return ok
}

/**
 * The rule for a branch name a request creates, whether by `POST /branches` or by a push (one rule for
 * both): checkBranchName, and no leading or trailing whitespace, not `HEAD` (in any case: git's name for
 * the current branch, and one file with `head` on a case-insensitive file system), not under `refs/`
 * (a full ref name, ambiguous as a short one), and git's own rules (checkGitBranchName). checkBranchName alone
 * stays the rule for naming an existing branch in a path, so branches made before this rule can still be reached.
 */
export const checkNewBranchName = (value: string): NameCheck => {
  const check = checkBranchName(value)
  if (!check.ok) return check
  if (value.trim() !== value) return fail("branch name must not start or end with whitespace")
  if (value.toUpperCase() === "HEAD") return fail("branch name must not be 'HEAD'")
  if (value.startsWith("refs/")) return fail("branch name must not start with 'refs/'")
  return checkGitBranchName(value)
}

/** Characters git never allows in a ref name (beyond control characters, refused earlier). */
const GIT_FORBIDDEN = /[ ~^:?*[\\]/

/**
 * git's `check-ref-format --branch` rules for `refs/heads/<value>`, so that every branch a request
 * creates is also a valid git branch (and a file name in a clone's `.git/refs`): not starting with
 * '-', no component starting with '.' or ending with '.lock', no '..', no '@{', not '@' alone (git's
 * name for HEAD), no space, '~', '^', ':', '?', '*', '[' or a backslash, no empty component (leading,
 * trailing or double '/'), not ending with '.'. Control characters are checkBranchName's.
 */
export const checkGitBranchName = (value: string): NameCheck => {
  if (value.startsWith("-")) return fail("branch name must not start with '-'")
  if (value === "@") return fail("branch name must not be '@'")
  if (value.includes("..")) return fail("branch name must not contain '..'")
  if (value.includes("@{")) return fail("branch name must not contain '@{'")
  if (GIT_FORBIDDEN.test(value)) return fail("branch name must not contain a space or any of ~ ^ : ? * [ \\")
  if (value.endsWith(".")) return fail("branch name must not end with '.'")
  for (const component of value.split("/")) {
    if (component.length === 0) return fail("branch name must not start or end with '/' or contain '//'")
    if (component.startsWith(".")) return fail("no part of a branch name between slashes may start with '.'")
    if (component.endsWith(".lock")) return fail("no part of a branch name between slashes may end with '.lock'")
  }
  return ok
}

/** A BLAKE3-256 digest as the sync protocol writes it (see objects/Blake3). */
export const HASH_PATTERN = /^[0-9a-f]{64}$/

export const checkHash = (value: unknown, what = "hash"): NameCheck =>
  typeof value === "string" && HASH_PATTERN.test(value) ? ok : fail(`${what} must be 64 lowercase hex characters`)

/** Free text shown to people (key names, display names, descriptions): no control characters, bounded length. */
export const checkText = (value: string, what: string, min: number, max: number): NameCheck => {
  const length = [...value].length
  if (length < min) return fail(min === 1 ? `${what} must not be empty` : `${what} must be at least ${min} characters`)
  if (length > max) return fail(`${what} must be at most ${max} characters`)
  if (hasControlCharacters(value)) return fail(`${what} must not contain control characters`)
  if (min > 0 && value.trim().length === 0) return fail(`${what} must not be blank`)
  return ok
}

/** Multi-line text (descriptions) allows newlines and tabs but no other control characters. */
export const checkMultilineText = (value: string, what: string, max: number): NameCheck => {
  if ([...value].length > max) return fail(`${what} must be at most ${max} characters`)
  // oxlint-disable-next-line no-control-regex -- finding control characters is the point
  if (/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/u.test(value)) return fail(`${what} must not contain control characters`)
  return ok
}

/**
 * A commit message or a pushed branch description: at most `max` characters; newlines, tabs and
 * carriage returns (a message written on Windows, which git keeps) but no other control character
 * (NUL above all: the database refuses it).
 */
export const checkMessage = (value: string, what: string, max: number): NameCheck => {
  if (value.length > max) return fail(`${what} must be at most ${max} characters`)
  // oxlint-disable-next-line no-control-regex -- finding control characters is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/u.test(value)) return fail(`${what} must not contain control characters other than newline, tab and carriage return`)
  if (!value.isWellFormed()) return fail(`${what} must be valid Unicode`)
  return ok
}

/** `owner/name` as written by people and in key limits. */
export const parseFullName = (value: string): { readonly owner: string; readonly name: string } | undefined => {
  const parts = value.split("/")
  if (parts.length !== 2) return undefined
  const [owner, name] = parts as [string, string]
  if (!checkSlug(owner).ok || !checkRepoName(name).ok) return undefined
  return { owner, name }
}
