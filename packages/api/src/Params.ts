/**
 * One schema per kind of path parameter, used by every route that takes one: the HttpApi
 * endpoints here and the server's raw routes (binary chunks, raw files, git and zip export).
 *
 * Each kind accepts exactly what can legitimately exist: the creation rules of `@grove/core`
 * Names (slugs, repository names, branch names, hashes), never stricter, and refuses what never
 * can (NUL and other control characters, values past the longest creatable one), so a bad value
 * answers 400 at the edge instead of reaching the database. The JSON Schema of each kind (in
 * `/api/openapi.json`) carries its length bounds and pattern; where the pattern cannot say
 * everything (valid Unicode), the document is a looser approximation and the description says so.
 */
import * as Names from "@grove/core/Names"
import { Schema } from "effect"

export interface Kind {
  /** The rule; its reason is the error message. */
  readonly check: (value: string) => Names.NameCheck
  readonly description: string
  readonly pattern: string
  readonly minLength: number
  readonly maxLength: number
  /** False when the JSON Schema accepts more than the check (Unicode validity, UTF-16 lengths). */
  readonly exact: boolean
}

/** A string schema enforcing `kind.check` (its reason is the error), documented by `kind`'s JSON Schema. */
export const make = (kind: Kind) => {
  const fragment = { pattern: kind.pattern, minLength: kind.minLength, maxLength: kind.maxLength }
  return Schema.String.check(Schema.makeFilter((value: string) => {
    const result = kind.check(value)
    return result.ok ? undefined : result.reason
  }, {
    expected: kind.description,
    toJsonSchema: () => kind.exact ? fragment : [fragment, true]
  })).annotate({ description: kind.description })
}

/** C0 and C1 control characters and DEL, as `Names.hasControlCharacters` finds them. */
const NO_CONTROL = "[^\\u0000-\\u001f\\u007f-\\u009f]"

/** An organization slug or user name (`{owner}`, `/orgs/{slug}`). */
export const Slug = make({
  check: (value) => Names.checkSlugFormat(value, "slug"),
  description: "An organization slug (a user's personal organization is named after the user).",
  pattern: "^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,37}[a-z0-9])?$",
  minLength: 1,
  maxLength: Names.MAX_SLUG,
  exact: true
})

/** A repository name (`{name}`). */
export const RepoName = make({
  check: Names.checkRepoName,
  description: "A repository name: letters, digits, '.', '_' and '-'; not starting with '.', no '..', not ending with '.git'.",
  pattern: "^(?!.*\\.\\.)(?!.*\\.[Gg][Ii][Tt]$)[A-Za-z0-9_][A-Za-z0-9._-]*$",
  minLength: 1,
  maxLength: Names.MAX_REPO_NAME,
  exact: true
})

const branchKind = {
  check: Names.checkBranchName,
  pattern: `^${NO_CONTROL}+$`,
  minLength: 1,
  maxLength: Names.MAX_BRANCH_NAME,
  exact: false
}

/** A branch name (`{branch}`), percent-encoded in the path: `/`, spaces and other Unicode are fine. */
export const BranchName = make({
  ...branchKind,
  description: `A branch name, percent-encoded: no control characters, valid Unicode, at most ${Names.MAX_BRANCH_NAME} UTF-16 code units.`
})

/** What a content read is at (`{commit}`): a commit hash, or a branch name for the branch's head. */
export const CommitRef = make({
  ...branchKind,
  description: "A commit hash (64 lowercase hex characters), or a branch name for that branch's head."
})

/** A BLAKE3 hash of a commit or chunk (`{hash}`). */
export const Hash = make({
  check: (value) => Names.checkHash(value),
  description: "A BLAKE3 hash: 64 lowercase hex characters.",
  pattern: Names.HASH_PATTERN.source,
  minLength: 64,
  maxLength: 64,
  exact: true
})

const MAX_KEY_ID = 64
const KEY_ID = /^[0-9A-Za-z-]+$/

/** A personal API key's id (`/api-keys/{id}`); ids are UUIDs, anything else of this shape is simply not found. */
export const KeyId = make({
  check: (value) =>
    value.length === 0
      ? { ok: false, reason: "key id must not be empty" }
      : value.length > MAX_KEY_ID
      ? { ok: false, reason: `key id must be at most ${MAX_KEY_ID} characters` }
      : KEY_ID.test(value)
      ? { ok: true }
      : { ok: false, reason: "key id may contain only letters, digits and '-'" },
  description: "A personal API key's id.",
  pattern: `^[0-9A-Za-z-]{1,${MAX_KEY_ID}}$`,
  minLength: 1,
  maxLength: MAX_KEY_ID,
  exact: true
})

/** `idem:` + the caller's id (36) + `:` + an Idempotency-Key (at most 200), with room to spare. */
const MAX_OPERATION_ID = 256
const OPERATION_ID = /^[\x21-\x7e]+$/

/** An operation id (`/operations/{id}`): a UUID, or the id an Idempotency-Key made (printable ASCII). */
export const OperationId = make({
  check: (value) =>
    value.length === 0
      ? { ok: false, reason: "operation id must not be empty" }
      : value.length > MAX_OPERATION_ID
      ? { ok: false, reason: `operation id must be at most ${MAX_OPERATION_ID} characters` }
      : OPERATION_ID.test(value)
      ? { ok: true }
      : { ok: false, reason: "operation id may contain only printable ASCII characters" },
  description: "An operation id, as a write's 202 answer gave it.",
  pattern: `^[!-~]{1,${MAX_OPERATION_ID}}$`,
  minLength: 1,
  maxLength: MAX_OPERATION_ID,
  exact: true
})

/** Longer than any path a checkout can hold (Linux PATH_MAX); each segment is checked by the route. */
export const MAX_REPO_PATH = 4096

/** A path inside a repository: bounded, no control character, valid Unicode ("" passes: the root). */
export const checkRepoPath = (value: string): Names.NameCheck =>
  value.length > MAX_REPO_PATH
    ? { ok: false, reason: `path must be at most ${MAX_REPO_PATH} characters` }
    : Names.hasControlCharacters(value)
    ? { ok: false, reason: "path must not contain control characters" }
    : !value.isWellFormed()
    ? { ok: false, reason: "path must be valid Unicode" }
    : { ok: true }

/** A path inside a repository (the `*` of `tree/{commit}/*`, `raw/{commit}/*`); "" is the root. */
export const RepoPath = make({
  check: checkRepoPath,
  description: "A path inside the repository, '/'-separated; empty for the root.",
  pattern: `^${NO_CONTROL}*$`,
  minLength: 0,
  maxLength: MAX_REPO_PATH,
  exact: false
})

/**
 * The router refuses a path segment longer than this before any schema sees it (the value is
 * answered 400 too): above every kind's maximum (256, an operation id), so each kind's own rule
 * is what a caller meets. The trailing path (`*`) is not a segment and has its own bound.
 */
export const MAX_SEGMENT = 1024

/** `/{owner}/{name}/...` */
export const OwnerRepo = { owner: Slug, name: RepoName }
/** `/{owner}/{name}/branches/{branch}/...` */
export const OwnerRepoBranch = { ...OwnerRepo, branch: BranchName }
