/**
 * Request body fields with a rule of `@grove/core` Names, as schemas: the request is refused with
 * the rule's reason at decoding, and `/api/openapi.json` carries the rule as length bounds and a
 * pattern (exact unless said otherwise), so a client knows in advance what is accepted.
 */
import * as Names from "@grove/core/Names"
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
    pattern: `^(?=.*[^${SPACE}])[^${CONTROL}]+$`,
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

/** A branch name a request creates (`POST /branches`, a parent named there). */
export const NewBranchName = P.make({
  check: Names.checkNewBranchName,
  description: `A new branch name: no control characters, valid Unicode, at most ${Names.MAX_BRANCH_NAME} UTF-16 code units, ` +
    "no leading or trailing whitespace, not 'HEAD', not starting with 'refs/'.",
  pattern: `^(?![${SPACE}])(?!.*[${SPACE}]$)(?![Hh][Ee][Aa][Dd]$)(?!refs/)[^${CONTROL}]+$`,
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

/** An instant in a request body: ISO 8601 with a time and a zone, e.g. `2030-01-31T12:00:00Z`. */
export const Timestamp = (what: string) =>
  P.make({
    check: (value) => isTimestamp(value) ? { ok: true } : { ok: false, reason: `${what} must be an ISO 8601 timestamp with a zone, e.g. 2030-01-31T12:00:00Z` },
    description: `${what}: an ISO 8601 timestamp with a time zone (Z or ±hh:mm), e.g. 2030-01-31T12:00:00Z.`,
    pattern: TIMESTAMP.source,
    minLength: 20,
    maxLength: 35,
    // The pattern does not know the calendar (30 February matches it).
    exact: false
  })
