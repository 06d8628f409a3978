/**
 * Rules for every name that reaches a URL path or the database: user names,
 * organization slugs, repository names and key names. Pure checks returning a
 * reason string, so the edge can answer 400 with a clear message.
 */

/** Slugs that would shadow fixed paths under `{base_url}` or `{site_url}`. */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set([
  "api", "api-keys", "admin", "assets", "cli-auth", "login", "logout", "new", "openapi.json", "operations", "orgs",
  "releases", "repos", "settings", "sites", "static", "version", "whoami", "health", "grove", "explore", "user", "users"
])

// oxlint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/u

export const hasControlCharacters = (value: string): boolean => CONTROL.test(value)

export type NameCheck = { readonly ok: true } | { readonly ok: false; readonly reason: string }

const ok: NameCheck = { ok: true }
const fail = (reason: string): NameCheck => ({ ok: false, reason })

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,37}[a-z0-9])?$/

/** User names and organization slugs share one namespace (a user's personal organization is named after them). */
export const checkSlug = (value: string, what = "slug"): NameCheck => {
  if (value.length === 0) return fail(`${what} must not be empty`)
  if (value.length > 39) return fail(`${what} must be at most 39 characters`)
  if (hasControlCharacters(value)) return fail(`${what} must not contain control characters`)
  if (!SLUG.test(value)) {
    return fail(`${what} may contain only lowercase letters, digits and inner hyphens, starting and ending with a letter or digit`)
  }
  if (value.includes("--")) return fail(`${what} must not contain consecutive hyphens`)
  if (RESERVED_SLUGS.has(value)) return fail(`${what} '${value}' is reserved`)
  return ok
}

const REPO_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/

export const checkRepoName = (value: string): NameCheck => {
  if (value.length === 0) return fail("repository name must not be empty")
  if (value.length > 100) return fail("repository name must be at most 100 characters")
  if (hasControlCharacters(value)) return fail("repository name must not contain control characters")
  if (/\s/u.test(value)) return fail("repository name must not contain whitespace")
  if (value.includes("/") || value.includes("\\")) return fail("repository name must not contain '/' or '\\'")
  if (value === "." || value === ".." || value.includes("..")) return fail("repository name must not be '.' or contain '..'")
  if (value.startsWith(".")) return fail("repository name must not start with '.'")
  if (value.toLowerCase().endsWith(".git")) return fail("repository name must not end with '.git'")
  if (!REPO_NAME.test(value)) return fail("repository name may contain only letters, digits, '.', '_' and '-'")
  return ok
}

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

/** `owner/name` as written by people and in key limits. */
export const parseFullName = (value: string): { readonly owner: string; readonly name: string } | undefined => {
  const parts = value.split("/")
  if (parts.length !== 2) return undefined
  const [owner, name] = parts as [string, string]
  if (!checkSlug(owner).ok || !checkRepoName(name).ok) return undefined
  return { owner, name }
}
