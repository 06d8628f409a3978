/**
 * Headers every response carries, installed once for the whole router:
 * - `X-Content-Type-Options: nosniff` on every response (JSON, files, zips, pages), so a browser
 *   never guesses a type from the bytes;
 * - on HTML pages, a Content-Security-Policy (no scripts, no frames, forms only to this site and
 *   the loopback listener of `grove login`) and `X-Frame-Options: DENY`, unless the page set its own.
 */
import { Effect } from "effect"
import { HttpEffect, HttpRouter, HttpServerResponse } from "effect/http"

export const PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self' http://127.0.0.1:* http://localhost:*; frame-ancestors 'none'; base-uri 'none'"

const isHtml = (response: HttpServerResponse.HttpServerResponse) => {
  const body = response.body
  const type = ("contentType" in body ? body.contentType : undefined) ?? response.headers["content-type"] ?? ""
  return type.toLowerCase().startsWith("text/html")
}

export const withSecurityHeaders = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
  let out = HttpServerResponse.setHeader(response, "x-content-type-options", "nosniff")
  if (isHtml(response)) {
    if (response.headers["content-security-policy"] === undefined) out = HttpServerResponse.setHeader(out, "content-security-policy", PAGE_CSP)
    if (response.headers["x-frame-options"] === undefined) out = HttpServerResponse.setHeader(out, "x-frame-options", "DENY")
  }
  return out
}

/**
 * A pre-response handler rather than a map over the response, so that responses made from errors
 * (JSON errors, unknown routes) get the headers too, whichever middleware turned them into responses.
 */
export const SecurityHeadersLive = HttpRouter.middleware(
  (app) => HttpEffect.withPreResponseHandler(app, (_request, response) => Effect.succeed(withSecurityHeaders(response))),
  { global: true }
)
