/**
 * Pages of the list endpoints: `?limit=` (1-200, default 200) and `?cursor=`. The body keeps its
 * shape (an array, or `{ branches }`), so clients that do not page keep working; a page that is
 * not the last answers `X-Next-Cursor: <cursor>` and `Link: <…?cursor=…>; rel="next"`.
 *
 * A cursor is the sort key of the last item it returned (base64url JSON), not a position: an item
 * added or removed between two requests neither repeats nor skips the others. Each list is sorted
 * here by its key (ties broken by a unique field), so the order of a page and of the cursor agree.
 */
import { ApiErrors, ApiFields } from "@grove/api"
import { Effect } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"

type Part = string | number | boolean

export interface Order<A> {
  /** The item's sort key, unique within the list. */
  readonly key: (item: A) => ReadonlyArray<Part>
  /** One per key part. */
  readonly descending: ReadonlyArray<boolean>
}

const comparePart = (a: Part, b: Part): number => (a < b ? -1 : a > b ? 1 : 0)

/** Over the parts both keys have: a shorter cursor key names the position before all items it prefixes. */
const compareKeys = (order: Order<unknown>, a: ReadonlyArray<Part>, b: ReadonlyArray<Part>): number => {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const difference = comparePart(a[i]!, b[i]!)
    if (difference !== 0) return order.descending[i] === true ? -difference : difference
  }
  return 0
}

const encodeCursor = (key: ReadonlyArray<Part>): string => Buffer.from(JSON.stringify(key)).toString("base64url")

const invalidCursor = () =>
  new ApiErrors.BadRequest({ error: "cursor is not one this list answered with; start again without it", code: "invalid_cursor" })

const decodeCursor = (cursor: string, length: number) =>
  Effect.try({
    try: () => JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown,
    catch: invalidCursor
  }).pipe(Effect.flatMap((value) =>
    Array.isArray(value) && value.length >= 1 && value.length <= length &&
      value.every((part) => typeof part === "string" || typeof part === "number" || typeof part === "boolean")
      ? Effect.succeed(value as ReadonlyArray<Part>)
      : Effect.fail(invalidCursor())
  ))

/** The query of a list endpoint, as decoded by `ApiFields.Page`. */
export interface PageQuery {
  /** 1-200 in digits, as the query's schema checked. */
  readonly limit?: string | undefined
  readonly cursor?: string | undefined
}

/**
 * One page of `items` (sorted here by `order`), and the next page's cursor in the response
 * headers when there are more.
 */
export const paginate = <A>(items: ReadonlyArray<A>, order: Order<A>, query: PageQuery) =>
  Effect.gen(function*() {
    const limit = query.limit === undefined ? ApiFields.MAX_PAGE : Math.min(Number(query.limit), ApiFields.MAX_PAGE)
    const keyed = items.map((item) => ({ item, key: order.key(item) }))
    keyed.sort((a, b) => compareKeys(order as Order<unknown>, a.key, b.key))
    let start = 0
    if (query.cursor !== undefined) {
      const after = yield* decodeCursor(query.cursor, order.descending.length)
      start = keyed.findIndex((entry) => compareKeys(order as Order<unknown>, entry.key, after) > 0)
      if (start === -1) start = keyed.length
    }
    const page = keyed.slice(start, start + limit)
    if (start + limit < keyed.length && page.length > 0) {
      const next = encodeCursor(page[page.length - 1]!.key)
      const request = yield* HttpServerRequest.HttpServerRequest
      const url = new URL(request.url, "http://grove")
      url.searchParams.set("cursor", next)
      url.searchParams.set("limit", String(limit))
      yield* HttpEffect.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, {
          "x-next-cursor": next,
          link: `<${url.pathname}${url.search}>; rel="next"`
        }))
      )
    }
    return page.map((entry) => entry.item)
  })
