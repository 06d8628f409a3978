/**
 * The organization's audit log (`GET /orgs/{slug}/audit`): who did what to which target, newest
 * first, for the organization's owners and admins. Entries never hold a secret.
 */
import * as Names from "@grove/core/Names"
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { BadRequest, Forbidden, NotFound, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"

export const AuditEntry = Schema.Struct({
  /** Opaque; increases with time within one server's database. */
  id: Schema.String,
  /** A user name, `service:<name>` for a service account, or `admin` for `grove-server` commands. */
  actor: Schema.String,
  /** e.g. `repo.visibility`, `repo.transfer.out`, `repo.delete`, `branch.merge.forced`. */
  action: Schema.String,
  /** What the action was applied to, e.g. `owner/name`. */
  target: Schema.String,
  /** The action's particulars (never a secret). */
  details: Schema.Record(Schema.String, Schema.Unknown),
  /** When it happened (ISO 8601, UTC). */
  created_at: Schema.String
})
export type AuditEntry = typeof AuditEntry.Type

const filter = (what: string) =>
  P.make({
    check: (value) =>
      value.length >= 1 && [...value].length <= 200 && !Names.hasControlCharacters(value)
        ? { ok: true }
        : { ok: false, reason: `${what} must be 1-200 characters (code points) without control characters` },
    description: `Only entries whose ${what} is exactly this.`,
    pattern: "^[^\\u0000-\\u001f\\u007f-\\u009f]+$",
    minLength: 1,
    maxLength: 200,
    exact: true
  })

// Every field in range (a day past the end of its month rolls over, as the description says), so the
// pattern says exactly what is accepted.
const TIMESTAMP =
  /^(?!0000)(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:\.(\d{1,9}))?)?(?:Z|([+-])([01]\d|2[0-3]):([0-5]\d))$/

/** Whether `value` is an ISO 8601 date and time with its offset (`2026-11-24T16:00:00Z`). */
export const isSince = (value: string): boolean => TIMESTAMP.test(value)

const EARLIEST = Date.UTC(1000, 0, 1)
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999)

/**
 * The instant `since` names, as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (microseconds kept): a day past the end of
 * its month rolls over to the next month; instants before the year 1000 or after 9999 are clamped there.
 */
export const sinceInstant = (value: string): string | undefined => {
  const match = TIMESTAMP.exec(value)
  if (match === null) return undefined
  const [year, month, day, hour, minute] = match.slice(1, 6).map(Number) as [number, number, number, number, number]
  const fraction = (match[7] ?? "").padEnd(6, "0")
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, Number(match[6] ?? 0), Number(fraction.slice(0, 3)))
  const offset = match[8] === undefined ? 0 : (match[8] === "-" ? -1 : 1) * (Number(match[9]) * 60 + Number(match[10])) * 60_000
  const instant = date.getTime() - offset
  const clamped = Math.min(Math.max(instant, EARLIEST), LATEST)
  return new Date(clamped).toISOString().replace("Z", `${clamped === instant ? fraction.slice(3, 6) : "000"}Z`)
}

export const Since = P.make({
  check: (value) => isSince(value) ? { ok: true } : { ok: false, reason: "since must be an ISO 8601 timestamp with an offset, e.g. 2026-11-24T16:00:00Z" },
  description: "Only entries at or after this instant: an ISO 8601 date and time with an offset (e.g. 2026-11-24T16:00:00Z); " +
    "a day past the end of its month rolls over to the next.",
  pattern: TIMESTAMP.source,
  minLength: 17,
  maxLength: 35,
  exact: true
})

export const AuditQuery = {
  action: Schema.optionalKey(filter("action")),
  actor: Schema.optionalKey(filter("actor")),
  since: Schema.optionalKey(Since),
  ...F.Page
}

export class AuditGroup extends HttpApiGroup.make("audit").add(
  HttpApiEndpoint.get("list", "/orgs/:slug/audit", {
    params: { slug: P.Slug },
    query: AuditQuery,
    success: Schema.Struct({ entries: Schema.Array(AuditEntry) }),
    error: [BadRequest, Unauthorized, Forbidden, NotFound]
  })
) {}
