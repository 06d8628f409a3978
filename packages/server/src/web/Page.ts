/**
 * Answering a page: the security headers (a CSP with scripts and styles from this site only, frame
 * denial, nosniff), `Cache-Control: private` (`no-store` for pages that show a secret) with
 * `Vary: Cookie`, compression when the browser takes it, and the error pages. A repository the
 * caller may not see answers the same 404 page as one that does not exist: the Authorizer already
 * answers both with the same NotFound, and the page shows nothing of it.
 */
import { ApiErrors } from "@grove/api"
import { Effect } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { gzipSync } from "node:zlib"
import { type AnyApiError, statusOf } from "../http/RawRoutes.ts"
import { layout } from "./Layout.ts"
import { type Html, html, renderDocument } from "./Render.ts"
import { type PageSession, pageSession } from "./Session.ts"

export const WEB_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

export const pageHeaders = (cache: "private" | "no-store") => ({
  "content-security-policy": WEB_CSP,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  // Pages depend on who asks: never kept by a shared cache, and revalidated by the browser.
  "cache-control": cache === "no-store" ? "no-store" : "private, no-cache",
  vary: "cookie, accept, accept-encoding"
})

export interface PageOptions {
  readonly status?: number | undefined
  readonly cache?: "private" | "no-store" | undefined
  readonly headers?: Record<string, string> | undefined
}

const acceptsGzip = (header: string | undefined) => /(^|,)\s*gzip\s*(;\s*q=(1|0?\.\d*[1-9]))?\s*(,|$)/i.test(header ?? "")

/** Below this, compressing costs more than the bytes it saves. */
const COMPRESS_FROM = 1024

export const htmlResponse = (document: Html, options: PageOptions = {}) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const text = renderDocument(document)
    const headers = { ...pageHeaders(options.cache ?? "private"), ...options.headers }
    const status = options.status ?? 200
    // gzip only: brotli at a quality worth having costs more time per page than it saves on a fast link.
    if (text.length >= COMPRESS_FROM && acceptsGzip(request.headers["accept-encoding"])) {
      return HttpServerResponse.uint8Array(gzipSync(text, { level: 6 }), {
        status,
        contentType: "text/html; charset=utf-8",
        headers: { ...headers, "content-encoding": "gzip" }
      })
    }
    return HttpServerResponse.text(text, { status, contentType: "text/html; charset=utf-8", headers })
  })

/** Anything a page may fail with that the browser should see as a page of its own: the raw routes' API errors. */
export type PageError = AnyApiError

const anonymousSession: PageSession = { caller: { principal: { kind: "anonymous" }, limits: { kind: "none" } }, user: undefined, token: undefined, csrfSecret: undefined }

/** The one "not found" page: the same bytes for a hidden repository, branch or file as for a missing one. */
export const notFoundPage = (session: PageSession) =>
  htmlResponse(
    layout({
      title: "Not found",
      session,
      body: html`<h1>Not found</h1><p>There is nothing here, or you do not have access to it.</p>${
        session.user === undefined ? html`<p><a href="/-/signin">Sign in</a> to see what you have access to.</p>` : null
      }`
    }),
    { status: 404 }
  )

export const errorPage = (session: PageSession, error: PageError) => {
  const status = statusOf(error)
  if (status === 404) return notFoundPage(session)
  const title = status === 401 ? "Sign in required" : status === 403 ? "Not allowed" : status === 503 ? "Try again" : "Cannot do that"
  return htmlResponse(
    layout({
      title,
      session,
      body: html`<h1>${title}</h1><p class="notice bad" role="alert">${error.error}</p>${
        status === 401 ? html`<p><a href="/-/signin">Sign in</a></p>` : null
      }`
    }),
    { status, ...(status === 503 ? { headers: { "retry-after": "1" } } : {}) }
  )
}

/**
 * Addresses under `/api` are the API's: a page route that matched one (`/api/x` fits `/:owner/:name`)
 * answers as the router does for a path it does not know, so the API's 404 stays JSON.
 */
export const notUnderApi = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  if (params.owner !== "api") return
  const request = yield* HttpServerRequest.HttpServerRequest
  return yield* Effect.fail(new HttpServerError.HttpServerError({ reason: new HttpServerError.RouteNotFound({ request }) }))
})

/**
 * A page route: the browser's session first, then the handler; its API errors become error pages.
 * A session that cannot be checked (database down) is a 503 page.
 */
export const pageRoute = <E extends PageError, R>(
  handler: (session: PageSession) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) =>
  Effect.gen(function*() {
    yield* notUnderApi
    const session = yield* pageSession.pipe(Effect.catch((error) => Effect.succeed(error)))
    if (session instanceof ApiErrors.ServiceUnavailable) return yield* errorPage(anonymousSession, session)
    return yield* handler(session).pipe(Effect.catch((error: E) => errorPage(session, error)))
  })

/** Whether the request asks for JSON rather than a page (where both live at one address). */
export const wantsJson = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const accept = (request.headers["accept"] ?? "").toLowerCase()
  return accept.includes("application/json") && !accept.includes("text/html")
}
