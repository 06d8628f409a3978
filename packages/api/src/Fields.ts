/**
 * Request body fields with a rule of `@grove/core` Names, as schemas: the request is refused with
 * the rule's reason at decoding, and `/api/openapi.json` carries the rule as length bounds and a
 * pattern (exact unless said otherwise), so a client knows in advance what is accepted.
 */
import * as Names from "@grove/core/Names"
import { checkWireEntryName } from "@grove/core/objects/Tree"
import { Schema } from "effect"
import * as P from "./Params.ts"

/** C0 and C1 control characters and DEL. */
const CONTROL = "\\u0000-\\u001f\\u007f-\\u009f"
/** What JavaScript's `String.prototype.trim` removes (the free-text rules use it). */
const SPACE = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"

const RESERVED = [...Names.RESERVED_SLUGS].map((slug) => slug.replace(/[.]/g, "\\.")).join("|")

/** A slug a request may create or name as a target: the slug's shape, and not reserved. */
export const NewSlug = P.make({
  check: (value) => Names.checkSlug(value, "slug"),
  description: "An organization slug: lowercase letters, digits and inner single hyphens; not a reserved name.",
  pattern: `^(?!(?:${RESERVED})$)(?!.*--)[a-z0-9](?:[a-z0-9-]{0,37}[a-z0-9])?$`,
  minLength: 1,
  maxLength: Names.MAX_SLUG,
  exact: true
})

/** `owner/name` (a key's repository limit). */
export const FullName = P.make({
  check: (value) => Names.parseFullName(value) === undefined ? { ok: false, reason: "repo must be 'owner/name'" } : { ok: true },
  description: "A repository as 'owner/name'.",
  pattern: `^(?!(?:${RESERVED})/)(?![^/]*--)[a-z0-9](?:[a-z0-9-]{0,37}[a-z0-9])?/(?!.*\\.\\.)(?!.*\\.[Gg][Ii][Tt]$)[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$`,
  minLength: 3,
  maxLength: Names.MAX_SLUG + 1 + Names.MAX_REPO_NAME,
  exact: true
})

/** One line of text shown to people: 1 to `max` characters, no control character, not blank. */
export const Text = (what: string, max: number) =>
  P.make({
    check: (value) => Names.checkText(value, what, 1, max),
    description: `${what}: 1-${max} characters, no control characters, not blank.`,
    // Some character neither a control nor a space, between any others that are not controls: exactly what checkText
    // takes. Not as a lookahead (`^(?=.*[^ ])...`): hypothesis (schemathesis) could not generate from that one and a
    // fuzz run stalled on its six fields (a webhook's secret, key and organization names), testing 5 of 84 operations.
    pattern: `^[^${CONTROL}]*[^${CONTROL}${SPACE}][^${CONTROL}]*$`,
    minLength: 1,
    maxLength: max,
    exact: true
  })

/** Text of several lines: at most `max` characters; newlines and tabs but no other control character. */
export const Multiline = (what: string, max: number) =>
  P.make({
    check: (value) => Names.checkMultilineText(value, what, max),
    description: `${what}: at most ${max} characters; newlines and tabs, no other control characters.`,
    pattern: "^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]*$",
    minLength: 0,
    maxLength: max,
    exact: true
  })

/** git's check-ref-format rules (Names.checkGitBranchName) but the characters, as lookaheads. */
const GIT_REF = "(?!-)(?!@$)(?!.*\\.\\.)(?!.*@\\{)(?!.*\\.$)(?!\\.)(?!.*/\\.)(?!.*\\.lock(?:/|$))(?!/)(?!.*/$)(?!.*//)"

/** A branch name a request creates (`POST /branches`, a parent named there, a push). */
export const NewBranchName = P.make({
  check: Names.checkNewBranchName,
  description: `A new branch name: no control characters, valid Unicode, at most ${Names.MAX_BRANCH_NAME} UTF-16 code units, ` +
    "no leading or trailing whitespace, not 'HEAD', not starting with 'refs/', and valid for git (check-ref-format --branch): " +
    "no space, '~', '^', ':', '?', '*', '[' or backslash, not starting with '-', no '..' or '@{', not '@', " +
    "no part between slashes starting with '.' or ending with '.lock', no empty part, not ending with '.'.",
  pattern: `^(?![${SPACE}])(?!.*[${SPACE}]$)(?![Hh][Ee][Aa][Dd]$)(?!refs/)${GIT_REF}[^${CONTROL} ~^:?*\\[\\\\]+$`,
  minLength: 1,
  maxLength: Names.MAX_BRANCH_NAME,
  exact: false
})

/** The most items one page of a list holds; also the default, so a client that does not page sees what it did before. */
export const MAX_PAGE = 200

/** `?limit=` of a list: 1 to MAX_PAGE, in decimal digits (the pattern says exactly that). */
const LIMIT = /^(?:[1-9]|[1-9][0-9]|1[0-9][0-9]|200)$/
export const PageLimit = P.make({
  check: (value) => LIMIT.test(value) ? { ok: true } : { ok: false, reason: `limit must be an integer from 1 to ${MAX_PAGE}` },
  description: `Items per page: 1-${MAX_PAGE} (default ${MAX_PAGE}).`,
  pattern: LIMIT.source,
  minLength: 1,
  maxLength: 3,
  exact: true
})

/** `?cursor=` of a list: the `X-Next-Cursor` (and the `Link: rel="next"`) a previous page answered with. */
const CURSOR = /^[A-Za-z0-9_-]{1,1024}$/
export const PageCursor = P.make({
  check: (value) => CURSOR.test(value) ? { ok: true } : { ok: false, reason: "cursor must be the X-Next-Cursor of a previous page" },
  description: "Opaque: the X-Next-Cursor of the previous page.",
  pattern: CURSOR.source,
  minLength: 1,
  maxLength: 1024,
  exact: true
})

/** The query of every list endpoint. */
export const Page = { limit: Schema.optionalKey(PageLimit), cursor: Schema.optionalKey(PageCursor) }

const TIMESTAMP = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]{1,9})?(?:Z|[+-]([0-9]{2}):([0-9]{2}))$/

/** True when `value` is an ISO 8601 (RFC 3339) date-time that names a real instant: no 30 February, no hour 24. */
export const isTimestamp = (value: string): boolean => {
  const m = TIMESTAMP.exec(value)
  if (m === null) return false
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m.slice(1).map((part) => Number(part ?? 0))
  const leap = year! % 4 === 0 && (year! % 100 !== 0 || year! % 400 === 0)
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month! - 1]
  return days !== undefined && day! >= 1 && day! <= days && hour! <= 23 && minute! <= 59 && second! <= 59 &&
    offsetHours! <= 23 && offsetMinutes! <= 59 && !Number.isNaN(Date.parse(value))
}

/** isTimestamp as a pattern, calendar included (the days of each month, 29 February in leap years only). */
const CALENDAR_TIMESTAMP = "^(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))" +
  "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)" +
  "T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"

/** An instant in a request body: ISO 8601 with a time and a zone, e.g. `2030-01-31T12:00:00Z`. */
export const Timestamp = (what: string) =>
  P.make({
    check: (value) => isTimestamp(value) ? { ok: true } : { ok: false, reason: `${what} must be an ISO 8601 timestamp with a zone, e.g. 2030-01-31T12:00:00Z` },
    description: `${what}: an ISO 8601 timestamp with a time zone (Z or ±hh:mm), e.g. 2030-01-31T12:00:00Z.`,
    pattern: CALENDAR_TIMESTAMP,
    minLength: 20,
    maxLength: 35,
    exact: true
  })

/**
 * A commit message, or a branch description or close reason a push carries: at most `max` UTF-16 code
 * units; newlines, tabs and carriage returns but no other control character (NUL would reach the database).
 */
export const Message = (what: string, max: number) =>
  P.make({
    check: (value) => Names.checkMessage(value, what, max),
    description: `${what}: at most ${max} characters; newlines, tabs and carriage returns, no other control characters.`,
    pattern: "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$",
    minLength: 0,
    maxLength: max,
    exact: false
  })

/** One line a push carries (a commit's author, its timestamp as the client formatted it): no control character, valid Unicode. */
export const Line = (what: string, min: number, max: number) =>
  P.make({
    check: (value) =>
      value.length < min
        ? { ok: false, reason: `${what} must not be empty` }
        : value.length > max
        ? { ok: false, reason: `${what} must be at most ${max} characters` }
        : Names.hasControlCharacters(value)
        ? { ok: false, reason: `${what} must not contain control characters` }
        : !value.isWellFormed()
        ? { ok: false, reason: `${what} must be valid Unicode` }
        : { ok: true },
    description: `${what}: ${min}-${max} characters, no control characters.`,
    pattern: `^[^${CONTROL}]*$`,
    minLength: min,
    maxLength: max,
    exact: false
  })

/** One of a few words (a wire enum kept a string, as the Oak client's types are). */
export const Word = (what: string, words: ReadonlyArray<string>) =>
  P.make({
    check: (value) => words.includes(value) ? { ok: true } : { ok: false, reason: `${what} must be one of ${words.join(", ")}` },
    description: `${what}: one of ${words.map((w) => `'${w}'`).join(", ")}.`,
    pattern: `^(?:${words.map((w) => w.replace(/[.]/g, "\\.")).join("|")})$`,
    minLength: Math.min(...words.map((w) => w.length)),
    maxLength: Math.max(...words.map((w) => w.length)),
    exact: true
  })

/** A file's path in a push's change list: '/'-separated, not empty, no control character. */
export const FilePath = P.make({
  check: (value) => value.length === 0 ? { ok: false, reason: "path must not be empty" } : P.checkRepoPath(value),
  description: "A file's path inside the repository, '/'-separated.",
  pattern: `^[^${CONTROL}]+$`,
  minLength: 1,
  maxLength: P.MAX_REPO_PATH,
  exact: false
})

const OPAQUE_ID = /^[A-Za-z0-9_-]{16,128}$/

/** A stage id or proof token: 16-128 ASCII letters, digits, '-' and '_'. */
export const OpaqueId = P.make({
  check: (value) =>
    OPAQUE_ID.test(value) ? { ok: true } : { ok: false, reason: "must be 16-128 ASCII letters, digits, '-' or '_'" },
  description: "An opaque id: 16-128 ASCII letters, digits, '-' or '_'.",
  pattern: OPAQUE_ID.source,
  minLength: 16,
  maxLength: 128,
  exact: true
})

/** A tree entry's name in a push: not empty, not '.' or '..', no '/' or control character (the tree check adds git's rules). */
export const EntryName = P.make({
  check: checkWireEntryName,
  description: "A tree entry's name: not empty, not '.' or '..', no '/' and no control characters.",
  pattern: `^(?!\\.\\.?$)[^${CONTROL}/]+$`,
  minLength: 1,
  maxLength: P.MAX_REPO_PATH,
  exact: false
})
