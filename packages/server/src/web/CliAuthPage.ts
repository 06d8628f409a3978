/**
 * `{site_url}/cli-auth`: the sign-in page of `grove login`.
 * - With `callback` (a loopback URL the client listens on) and `state`, a successful sign-in
 *   redirects there with a one-time `code` and the `state`; the client exchanges the code at
 *   `POST {base_url}/cli-auth/exchange`. The session token itself never appears in a URL, so it
 *   never lands in the browser's history.
 * - Without a callback (headless), with `client=oak` (its own button), it shows `username:<session key>`, the
 *   code the Oak client's `oak login` takes when it cannot open a browser (it stores what it is given).
 * - Without a callback (headless), it shows a one-time code to paste into the client, which
 *   exchanges it the same way.
 *
 * The form is protected against login CSRF twice: a token in a SameSite=Strict cookie that the
 * form repeats in a hidden field (double submit), and an Origin (or Referer) check. Failures are
 * throttled per user name and client address (`SignInThrottle`).
 */
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { randomBytes } from "node:crypto"
import { ServerConfig } from "../Config.ts"
import { Identity } from "../access/Identity.ts"
import { addBehindProxies } from "../http/TrustedProxies.ts"
import * as Secrets from "../access/Secrets.ts"
import { escapeHtml, page, pageHeaders } from "./Html.ts"
import { SignInThrottle } from "./SignInThrottle.ts"

/** Only loopback callbacks: the code must never be sent anywhere but the user's own machine. */
export const checkCallback = (value: string): URL | undefined => {
  try {
    const url = new URL(value)
    const loopback = url.hostname === "127.0.0.1" || url.hostname === "localhost" || url.hostname === "[::1]"
    if (url.protocol !== "http:" || !loopback || url.port === "" || url.username !== "" || url.password !== "") return undefined
    return url
  } catch {
    return undefined
  }
}

const STATE = /^[A-Za-z0-9_-]{8,128}$/

/** The CSRF cookie; its value is repeated in the form's hidden `csrf` field. */
export const CSRF_COOKIE = "grove_signin"
const CSRF_TOKEN = /^[A-Za-z0-9_-]{43}$/

/** Compared through their hashes (`Secrets`), in constant time whatever their lengths. */
const sameSecret = (a: string, b: string): boolean => Secrets.constantTimeEqualHex(Secrets.hashToken(a), Secrets.hashToken(b))

const form = (params: { callback: string; state: string; csrf: string; error?: string; username?: string }) =>
  page(
    "Sign in",
    `<h1>Sign in to Grove</h1>
<p>${params.callback === "" ? "You will get a one-time code to paste into <code>grove login --headless</code>." : "The <code>grove</code> command line client on this machine asked to sign in."}</p>
${params.error === undefined ? "" : `<p class="error" role="alert">${escapeHtml(params.error)}</p>`}
<form method="post" action="cli-auth">
  <input type="hidden" name="csrf" value="${escapeHtml(params.csrf)}">
  <input type="hidden" name="callback" value="${escapeHtml(params.callback)}">
  <input type="hidden" name="state" value="${escapeHtml(params.state)}">
  <label for="username">User name</label>
  <input type="text" id="username" name="username" autocomplete="username" required value="${escapeHtml(params.username ?? "")}">
  <label for="password">Password</label>
  <input type="password" id="password" name="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
  ${params.callback === "" ? `<button type="submit" name="client" value="oak">Sign in the Oak client instead</button>
  <p>The Oak client (<code>oak login</code> without a browser) takes a <code>username:key</code> code: this button shows one, a
  session key made for it, once.</p>` : ""}
</form>`
  )

const html = (body: string, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.text(body, { status, headers: { ...pageHeaders, ...headers }, contentType: "text/html; charset=utf-8" })

const csrfCookie = (token: string, siteUrl: string) =>
  `${CSRF_COOKIE}=${token}; HttpOnly; SameSite=Strict; Max-Age=3600${siteUrl.startsWith("https:") ? "; Secure" : ""}`

/**
 * A cross-site form post carries a foreign Origin (or, from older browsers, Referer): refuse it.
 * Same origin means the configured site URL's origin or the origin the request was addressed to.
 */
export const sameOrigin = (request: HttpServerRequest.HttpServerRequest, siteUrl: string): boolean => {
  const claimed = request.headers["origin"] ?? request.headers["referer"]
  if (claimed === undefined) return true
  try {
    const origin = new URL(claimed)
    if (origin.origin === new URL(siteUrl).origin) return true
    const host = request.headers["host"]
    return host !== undefined && origin.host === host && (origin.protocol === "http:" || origin.protocol === "https:")
  } catch {
    return false // "null" and anything unparsable
  }
}

const show = HttpRouter.add("GET", "/cli-auth", (request) =>
  Effect.gen(function*() {
    const config = yield* ServerConfig
    const url = new URL(request.url, "http://x")
    const callback = url.searchParams.get("callback") ?? ""
    const state = url.searchParams.get("state") ?? ""
    if (callback !== "" && (checkCallback(callback) === undefined || !STATE.test(state))) {
      return html(page("Sign in", "<h1>Invalid sign-in link</h1><p class=\"error\">The callback must be a loopback address and the state well-formed. Run <code>grove login</code> again.</p>"), 400)
    }
    // Keep a valid token so that two open sign-in tabs do not invalidate each other.
    const existing = request.cookies[CSRF_COOKIE]
    const csrf = existing !== undefined && CSRF_TOKEN.test(existing) ? existing : randomBytes(32).toString("base64url")
    return html(form({ callback, state, csrf }), 200, { "set-cookie": csrfCookie(csrf, config.siteUrl) })
  }))

const handleSubmit = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const identity = yield* Identity
  const throttle = yield* SignInThrottle
  const config = yield* ServerConfig
  // The route's body limit (http/BodyLimits.ts, 16 KiB) stops the read past it: that failure is a 413 too.
  const text = yield* request.text.pipe(Effect.orElseSucceed(() => undefined))
  if (text === undefined || text.length > 16_384) return html(page("Sign in", "<h1>Request too large</h1>"), 413)
  const fields = new URLSearchParams(text)
  const username = (fields.get("username") ?? "").trim()
  const password = fields.get("password") ?? ""
  const callback = fields.get("callback") ?? ""
  const state = fields.get("state") ?? ""
  const csrf = fields.get("csrf") ?? ""
  const cookie = request.cookies[CSRF_COOKIE] ?? ""
  if (!sameOrigin(request, config.siteUrl) || !CSRF_TOKEN.test(csrf) || !sameSecret(csrf, cookie)) {
    return html(
      page("Sign in", "<h1>Sign-in not accepted</h1><p class=\"error\">This form did not come from this server's sign-in page, or it expired. Open the sign-in address again.</p>"),
      403
    )
  }
  const target = callback === "" ? undefined : checkCallback(callback)
  if (callback !== "" && (target === undefined || !STATE.test(state))) {
    return html(page("Sign in", "<h1>Invalid sign-in request</h1><p class=\"error\">Run <code>grove login</code> again.</p>"), 400)
  }
  const address = Option.getOrElse(request.remoteAddress, () => "unknown")
  const verdict = yield* throttle.check(username, address)
  if (!verdict.allowed) {
    return html(
      form({ callback, state, csrf, username, error: `Too many failed attempts. Wait ${verdict.retryAfterSeconds} seconds and try again.` }),
      429,
      { "retry-after": String(verdict.retryAfterSeconds) }
    )
  }
  const user = yield* identity.checkPassword(username, password).pipe(Effect.orElseSucceed(() => Option.none()))
  if (Option.isNone(user)) {
    yield* throttle.failed(username, address)
    return html(form({ callback, state, csrf, username, error: "Wrong user name or password." }), 401)
  }
  yield* throttle.succeeded(username, address)
  const code = yield* identity.issueCliCode(user.value.id).pipe(Effect.orDie)
  if (target === undefined && fields.get("client") === "oak") {
    // The Oak client stores what it is given without an exchange of its own: the code is exchanged here, on the
    // signed-in response only (no-store), for the same session key `grove login --headless` would get.
    const session = yield* identity.exchangeCliCode(code).pipe(Effect.orDie)
    return html(page(
      "Oak sign-in code",
      `<h1>Your Oak sign-in code</h1><p>Paste it into <code>oak login</code>. It holds a session key for ${escapeHtml(session.username)}, valid until
${escapeHtml(session.expiresAt!.toISOString())}; it is not shown again.</p>
<p class="code" id="code">${escapeHtml(`${session.username}:${session.token}`)}</p>`
    ))
  }
  if (target === undefined) {
    return html(page(
      "One-time code",
      `<h1>Your one-time code</h1><p>Paste it into <code>grove login --headless</code>. It works once, for 10 minutes.</p><p class="code" id="code">${escapeHtml(code)}</p>`
    ))
  }
  target.searchParams.set("code", code)
  target.searchParams.set("state", state)
  return HttpServerResponse.redirect(target.toString(), { status: 303, headers: pageHeaders })
})

/** Behind trusted proxies the client address the throttle counts is the one they name (http/TrustedProxies.ts). */
const submit = addBehindProxies("POST", "/cli-auth", handleSubmit)

export const CliAuthPageRoutes = Layer.mergeAll(show, submit)
