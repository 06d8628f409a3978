/**
 * Pages of the list endpoints: `?limit=` (1-200, default 200) and `?cursor=`. The body keeps its
 * shape (an object naming its items, e.g. `{ repos }`), so clients that do not page keep working; a page that is
 * not the last answers `X-Next-Cursor: <cursor>` and `Link: <…?cursor=…>; rel="next"`.
 *
 * The database does the paging (`db/Keyset.ts`): each list is ordered by its sort key plus a unique
 * column and a page is `WHERE (key, id) > cursor ... LIMIT limit + 1`. A cursor is the key of the
 * last row a page returned (base64url JSON), not a position: a row added or removed between two
 * requests neither repeats nor skips the others. Here the query's `limit` and `cursor` become a
 * `PageRequest` (a cursor is checked part by part before it reaches SQL), and the rows the query
 * answered become the page and the next cursor.
 */
import { ApiErrors, ApiFields } from "@grove/api"
import { Effect } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Keyed, KeyPart, PageRequest } from "../db/Keyset.ts"

/** What each part of a list's key holds, so a cursor that is not one of its keys never reaches SQL. */
export type CursorPart = "text" | "timestamp" | "uuid" | "boolean"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
// timestamptz::text: 2026-11-24 16:12:06.123456+00 (an offset may carry minutes, ISO's T and Z are accepted too).
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,6})?(?:Z|[+-](\d{2})(?::?(\d{2}))?)?$/

const isTimestamp = (value: string): boolean => {
  const match = TIMESTAMP.exec(value)
  if (match === null) return false
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const date = new Date(Date.UTC(year, month - 1, day))
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day &&
    hour < 24 && minute < 60 && second < 60 && Number(match[7] ?? 0) <= 15 && Number(match[8] ?? 0) < 60
}

const partFits = (kind: CursorPart, value: unknown): boolean => {
  switch (kind) {
    case "boolean":
      return typeof value === "boolean"
    case "uuid":
      return typeof value === "string" && UUID.test(value)
    case "timestamp":
      return typeof value === "string" && isTimestamp(value)
    case "text":
      return typeof value === "string" && value.length <= 1000 && !value.includes("\u0000")
  }
}

const encodeCursor = (key: ReadonlyArray<KeyPart>): string => Buffer.from(JSON.stringify(key)).toString("base64url")

const invalidCursor = () =>
  new ApiErrors.BadRequest({ error: "cursor is not one this list answered with; start again without it", code: "invalid_cursor" })

const decodeCursor = (cursor: string, shape: ReadonlyArray<CursorPart>) =>
  Effect.try({
    try: () => JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown,
    catch: invalidCursor
  }).pipe(Effect.flatMap((value) =>
    Array.isArray(value) && (value.length === 0 || value.length === shape.length && shape.every((kind, i) => partFits(kind, value[i])))
      ? Effect.succeed(value as ReadonlyArray<KeyPart>)
      : Effect.fail(invalidCursor())
  ))

/** The query of a list endpoint, as decoded by `ApiFields.Page`. */
export interface PageQuery {
  /** 1-200 in digits, as the query's schema checked. */
  readonly limit?: string | undefined
  readonly cursor?: string | undefined
}

/**
 * The page a query asks for: its limit, and the key its cursor names (checked against the list's
 * key `shape`). The empty key (`W10`, `[]`) names the start of every list.
 */
export const pageRequest = (query: PageQuery, shape: ReadonlyArray<CursorPart>) =>
  Effect.gen(function*() {
    const limit = query.limit === undefined ? ApiFields.MAX_PAGE : Math.min(Number(query.limit), ApiFields.MAX_PAGE)
    const key = query.cursor === undefined ? undefined : yield* decodeCursor(query.cursor, shape)
    const after = key === undefined || key.length === 0 ? undefined : key
    return { limit, after } satisfies PageRequest
  })

/**
 * The page out of the rows a keyset query answered (at most `limit + 1`: the extra one says there
 * is a next page), and the next page's cursor in the response headers when there is one.
 */
export const pageResponse = <A>(rows: ReadonlyArray<Keyed<A>>, page: PageRequest) =>
  Effect.gen(function*() {
    const items = rows.slice(0, page.limit)
    if (rows.length > page.limit && items.length > 0) {
      const next = encodeCursor(items[items.length - 1]!.key)
      const request = yield* HttpServerRequest.HttpServerRequest
      const url = new URL(request.url, "http://grove")
      url.searchParams.set("cursor", next)
      url.searchParams.set("limit", String(page.limit))
      yield* HttpEffect.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, {
          "x-next-cursor": next,
          link: `<${url.pathname}${url.search}>; rel="next"`
        }))
      )
    }
    return items.map((entry) => entry.row)
  })
