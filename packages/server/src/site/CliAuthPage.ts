/**
 * `{site_url}/cli-auth`: the sign-in page of `grove login`.
 * - With `callback` (a loopback URL the client listens on) and `state`, a successful sign-in
 *   redirects there with `token`, `username` and `state`.
 * - Without a callback (headless), it shows a one-time code to paste into the client, which
 *   exchanges it at `POST {base_url}/cli-auth/exchange`.
 */
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { Identity } from "../identity/Identity.ts"
import { escapeHtml, page, pageHeaders } from "./Html.ts"
import { SignInThrottle } from "./SignInThrottle.ts"

/** Only loopback callbacks: the token must never be sent anywhere but the user's own machine. */
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

const form = (params: { callback: string; state: string; error?: string; username?: string }) =>
  page(
    "Sign in",
    `<h1>Sign in to Grove</h1>
<p>${params.callback === "" ? "You will get a one-time code to paste into <code>grove login --headless</code>." : "The <code>grove</code> command line client on this machine asked to sign in."}</p>
${params.error === undefined ? "" : `<p class="error" role="alert">${escapeHtml(params.error)}</p>`}
<form method="post" action="cli-auth">
  <input type="hidden" name="callback" value="${escapeHtml(params.callback)}">
  <input type="hidden" name="state" value="${escapeHtml(params.state)}">
  <label for="username">User name</label>
  <input type="text" id="username" name="username" autocomplete="username" required value="${escapeHtml(params.username ?? "")}">
  <label for="password">Password</label>
  <input type="password" id="password" name="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>`
  )

const html = (body: string, status = 200) =>
  HttpServerResponse.text(body, { status, headers: pageHeaders, contentType: "text/html; charset=utf-8" })

const show = HttpRouter.add("GET", "/cli-auth", (request) =>
  Effect.sync(() => {
    const url = new URL(request.url, "http://x")
    const callback = url.searchParams.get("callback") ?? ""
    const state = url.searchParams.get("state") ?? ""
    if (callback !== "" && (checkCallback(callback) === undefined || !STATE.test(state))) {
      return html(page("Sign in", "<h1>Invalid sign-in link</h1><p class=\"error\">The callback must be a loopback address and the state well-formed. Run <code>grove login</code> again.</p>"), 400)
    }
    return html(form({ callback, state }))
  }))

const submit = HttpRouter.add("POST", "/cli-auth", (request) =>
  Effect.gen(function*() {
    const identity = yield* Identity
    const throttle = yield* SignInThrottle
    const text = yield* request.text.pipe(Effect.orElseSucceed(() => ""))
    if (text.length > 16_384) return html(page("Sign in", "<h1>Request too large</h1>"), 413)
    const fields = new URLSearchParams(text)
    const username = (fields.get("username") ?? "").trim()
    const password = fields.get("password") ?? ""
    const callback = fields.get("callback") ?? ""
    const state = fields.get("state") ?? ""
    const target = callback === "" ? undefined : checkCallback(callback)
    if (callback !== "" && (target === undefined || !STATE.test(state))) {
      return html(page("Sign in", "<h1>Invalid sign-in request</h1><p class=\"error\">Run <code>grove login</code> again.</p>"), 400)
    }
    if (!(yield* throttle.allow(username))) {
      return html(form({ callback, state, username, error: "Too many failed attempts. Wait a few minutes and try again." }), 429)
    }
    const user = yield* identity.checkPassword(username, password).pipe(Effect.orElseSucceed(() => Option.none()))
    if (Option.isNone(user)) {
      yield* throttle.failed(username)
      return html(form({ callback, state, username, error: "Wrong user name or password." }), 401)
    }
    yield* throttle.succeeded(username)
    if (target === undefined) {
      const code = yield* identity.issueCliCode(user.value.id).pipe(Effect.orDie)
      return html(page(
        "One-time code",
        `<h1>Your one-time code</h1><p>Paste it into <code>grove login --headless</code>. It works once, for 10 minutes.</p><p class="code" id="code">${escapeHtml(code)}</p>`
      ))
    }
    const session = yield* identity.createSession(user.value.id).pipe(Effect.orDie)
    target.searchParams.set("token", session.token)
    target.searchParams.set("username", user.value.username)
    target.searchParams.set("state", state)
    return HttpServerResponse.redirect(target.toString(), { status: 303, headers: pageHeaders })
  }))

export const CliAuthPageRoutes = Layer.mergeAll(show, submit)
