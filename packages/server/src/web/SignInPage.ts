/**
 * Browser sign-in and sign-out for the web pages (`/-/signin`, `/-/signout`). The password check,
 * the failure throttle and the session are the ones `grove login`'s page uses (Identity,
 * SignInThrottle); the session token goes into the `HttpOnly` cookie (`Session.ts`), never into a
 * page or a URL. The form carries a double-submit CSRF token and is refused from another origin.
 * Behind `--trusted-proxies`, the throttle counts the client the proxy names and the cookies are
 * `Secure` when it forwarded https (http/TrustedProxies.ts); from other peers those headers are ignored.
 */
import { Names } from "@grove/core"
import { Effect, Layer, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { Identity } from "../access/Identity.ts"
import { ServerConfig } from "../Config.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { addBehindProxies } from "../http/TrustedProxies.ts"
import { submittedForm } from "./Forms.ts"
import { csrfField, layout } from "./Layout.ts"
import { htmlResponse, pageRoute } from "./Page.ts"
import { html } from "./Render.ts"
import { clearSessionCookie, newCsrfSecret, overHttps, type PageSession, sessionCookie, signinCsrfCookie } from "./Session.ts"
import { SignInThrottle } from "./SignInThrottle.ts"

/** Only a path on this site: never `//host` or a scheme, so sign-in cannot redirect elsewhere. */
export const localTarget = (next: string | null): string =>
  next !== null && next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\") && !Names.hasControlCharacters(next) ? next : "/"

const form = (session: PageSession, next: string, options: { readonly error?: string; readonly username?: string } = {}) =>
  layout({
    title: "Sign in",
    session,
    body: html`<div class="narrow"><h1>Sign in to Grove</h1>
${options.error === undefined ? null : html`<p class="notice bad" role="alert">${options.error}</p>`}
<form method="post" action="/-/signin">
${csrfField(session)}<input type="hidden" name="next" value=${next} />
<label for="username">User name</label>
<input type="text" id="username" name="username" autocomplete="username" required value=${options.username ?? ""} />
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required />
<div class="actions"><button type="submit" class="primary">Sign in</button></div>
</form>
<p class="muted">No password yet? An administrator sets one with <code>grove-server user passwd</code>.</p></div>`
  })

/** The sign-in form; a browser without the CSRF cookie gets one (and its masked copy in the form). */
const show = addBehindProxies("GET", "/-/signin", pageRoute((signedOut) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const config = yield* ServerConfig
    const next = localTarget(new URL(request.url, "http://x").searchParams.get("next"))
    if (signedOut.user !== undefined) return HttpServerResponse.redirect(next, { status: 303 })
    const secret = signedOut.csrfSecret ?? newCsrfSecret()
    return yield* htmlResponse(form({ ...signedOut, csrfSecret: secret }, next), {
      cache: "no-store",
      headers: { "set-cookie": signinCsrfCookie(secret, overHttps(request, config.siteUrl)) }
    })
  })
))

const submit = addBehindProxies("POST", "/-/signin", pageRoute((session) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const config = yield* ServerConfig
    const identity = yield* Identity
    const throttle = yield* SignInThrottle
    const fields = yield* submittedForm(session)
    const username = (fields.get("username") ?? "").trim().slice(0, 200)
    const password = fields.get("password") ?? ""
    const next = localTarget(fields.get("next"))
    const address = Option.getOrElse(request.remoteAddress, () => "unknown")
    const verdict = yield* throttle.check(username, address)
    if (!verdict.allowed) {
      return yield* htmlResponse(form(session, next, { username, error: `Too many failed attempts. Wait ${verdict.retryAfterSeconds} seconds and try again.` }), {
        status: 429,
        cache: "no-store",
        headers: { "retry-after": String(verdict.retryAfterSeconds) }
      })
    }
    const user = yield* dbUnavailable(identity.checkPassword(username, password))
    if (Option.isNone(user)) {
      yield* throttle.failed(username, address)
      return yield* htmlResponse(form(session, next, { username, error: "Wrong user name or password." }), { status: 401, cache: "no-store" })
    }
    yield* throttle.succeeded(username, address)
    const issued = yield* dbUnavailable(identity.createSession(user.value.id))
    return HttpServerResponse.redirect(next, {
      status: 303,
      headers: { "set-cookie": sessionCookie(issued.token, issued.expiresAt, overHttps(request, config.siteUrl)), "cache-control": "no-store" }
    })
  })
))

/** Signing out ends the session (revoked, so a copied cookie stops working too) and forgets the cookie. */
const signOut = addBehindProxies("POST", "/-/signout", pageRoute((session) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const config = yield* ServerConfig
    const identity = yield* Identity
    if (session.user === undefined || session.token === undefined) return HttpServerResponse.redirect("/", { status: 303 })
    yield* submittedForm(session)
    yield* dbUnavailable(identity.endSession(session.token))
    return HttpServerResponse.redirect("/", { status: 303, headers: { "set-cookie": clearSessionCookie(overHttps(request, config.siteUrl)), "cache-control": "no-store" } })
  })
))

export const SignInPages = Layer.mergeAll(show, submit, signOut)
