/**
 * The browser session of the web pages: the session token `POST /-/signin` got from
 * `Identity.createSession` (the same kind of token `grove login` receives) in an `HttpOnly`,
 * `SameSite=Lax` cookie, `Secure` when the site is served over https (or a trusted proxy says so). A page resolves it with
 * `Identity.authenticate`, exactly as the API resolves a bearer token, so every read of a page is
 * authorized as the API would authorize the same user.
 *
 * Forms carry a CSRF token: signed in, it is derived from the session token (nothing stored); signed
 * out (the sign-in form), it is a double-submit cookie. Either way it is masked with a fresh random
 * pad in every response, so a compressed page never repeats the same secret bytes (BREACH).
 */
import { ApiErrors, type Caller } from "@grove/api"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { Identity } from "../access/Identity.ts"

export const SESSION_COOKIE = "grove_session"
/** The sign-in form's double-submit cookie (signed out, there is no session to derive a token from). */
export const SIGNIN_CSRF_COOKIE = "grove_csrf"

export interface PageUser {
  readonly id: string
  readonly username: string
  readonly siteAdmin: boolean
}

export interface PageSession {
  readonly caller: Caller
  readonly user: PageUser | undefined
  /** The session token, for the page's own calls to the API on the user's behalf. */
  readonly token: string | undefined
  /** The unmasked CSRF secret of this browser: from the session, or from the sign-in cookie. */
  readonly csrfSecret: string | undefined
}

const anonymous: Caller = { principal: { kind: "anonymous" }, limits: { kind: "none" } }

const csrfOfToken = (token: string) => createHash("sha256").update(`grove-web-csrf\0${token}`).digest().subarray(0, 24)

/** A masked form of the secret: pad || (secret xor pad), base64url. Different in every response. */
export const maskCsrf = (secret: string): string => {
  const raw = Buffer.from(secret, "base64url")
  const pad = randomBytes(raw.length)
  const masked = Buffer.alloc(raw.length)
  for (let i = 0; i < raw.length; i++) masked[i] = raw[i]! ^ pad[i]!
  return Buffer.concat([pad, masked]).toString("base64url")
}

/** Whether a submitted (masked) token unmasks to the secret, in constant time. */
export const checkCsrf = (submitted: string, secret: string | undefined): boolean => {
  if (secret === undefined || !/^[A-Za-z0-9_-]{1,200}$/.test(submitted)) return false
  const expected = Buffer.from(secret, "base64url")
  const bytes = Buffer.from(submitted, "base64url")
  if (expected.length === 0 || bytes.length !== expected.length * 2) return false
  const unmasked = Buffer.alloc(expected.length)
  for (let i = 0; i < expected.length; i++) unmasked[i] = bytes[i]! ^ bytes[i + expected.length]!
  return timingSafeEqual(unmasked, expected)
}

/**
 * Whether the browser reached this page over https: the site URL says so, or a trusted proxy does
 * (`X-Forwarded-Proto`; the request's `protocol` is set from it only for a peer in `--trusted-proxies`,
 * see http/TrustedProxies.ts). Then the cookies are `Secure`.
 */
export const overHttps = (request: HttpServerRequest.HttpServerRequest, siteUrl: string): boolean =>
  siteUrl.startsWith("https:") || request.protocol === "https"

const secure = (https: boolean) => (https ? "; Secure" : "")

export const sessionCookie = (token: string, expiresAt: Date | undefined, https: boolean) =>
  `${SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Lax${
    expiresAt === undefined ? "" : `; Max-Age=${Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000))}`
  }${secure(https)}`

export const clearSessionCookie = (https: boolean) => `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0${secure(https)}`

export const signinCsrfCookie = (secret: string, https: boolean) =>
  `${SIGNIN_CSRF_COOKIE}=${secret}; Path=/-/; HttpOnly; SameSite=Strict; Max-Age=3600${secure(https)}`

export const newCsrfSecret = () => randomBytes(24).toString("base64url")

/**
 * The page's caller. A missing, invalid or expired cookie is anonymous (the page then offers to sign
 * in); a database that cannot check it is a 503, never a silent downgrade that would show a signed-in
 * user a public-only view as if it were all.
 */
export const pageSession: Effect.Effect<PageSession, ApiErrors.ServiceUnavailable, Identity | HttpServerRequest.HttpServerRequest> = Effect.gen(
  function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const signinSecret = request.cookies[SIGNIN_CSRF_COOKIE]
    const signedOut: PageSession = {
      caller: anonymous,
      user: undefined,
      token: undefined,
      csrfSecret: signinSecret !== undefined && /^[A-Za-z0-9_-]{32}$/.test(signinSecret) ? signinSecret : undefined
    }
    const token = request.cookies[SESSION_COOKIE]
    if (token === undefined || token === "" || token.length > 200) return signedOut
    const identity = yield* Identity
    const caller = yield* identity.authenticate(token).pipe(
      Effect.map((caller): Caller | undefined => caller),
      Effect.catchTags({
        InvalidToken: () => Effect.succeed(undefined),
        TokenExpired: () => Effect.succeed(undefined),
        SqlError: () =>
          Effect.fail(new ApiErrors.ServiceUnavailable({ error: "could not check the session right now; try again", code: "auth_unavailable", retryable: true }))
      })
    )
    // Only a session signs a browser in (a personal key in the cookie is ignored): pages assume a user's full rights.
    if (caller === undefined || caller.principal.kind !== "user" || caller.limits.kind !== "session") return signedOut
    const { principal } = caller
    return {
      caller,
      user: { id: principal.userId, username: principal.username, siteAdmin: principal.siteAdmin },
      token,
      csrfSecret: csrfOfToken(token).toString("base64url")
    }
  }
)
