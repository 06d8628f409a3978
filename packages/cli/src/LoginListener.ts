/**
 * The loopback half of the browser login: an HTTP listener on 127.0.0.1 that
 * waits for the sign-in page to redirect the browser to
 * `/callback?code=...&state=...`. The code is a one-time code the client then
 * exchanges for the session (`POST /api/cli-auth/exchange`): the address stays
 * in the browser's history, so it must never carry the session token itself.
 * A request whose `state` is not ours is answered with an error page and
 * ignored, so a stray or forged request can neither sign us in nor cancel the
 * login.
 */
import { Deferred, Effect, Scope } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { failure } from "./Failures.ts"

export interface LoginCallback {
  /** The one-time code to exchange for the session. */
  readonly code: string
}

const CODE = /^[0-9A-Za-z-]{10,16}$/

export interface Listener {
  /** `http://127.0.0.1:<port>/callback`, for the sign-in page to redirect to. */
  readonly callbackUrl: string
  /** Completes with the first valid callback. */
  readonly result: Effect.Effect<LoginCallback>
}

/** 32 URL-safe characters (192 random bits). */
export const newState = (): string => randomBytes(24).toString("base64url")

/** Equal strings, in time that does not depend on where they differ (or on their lengths). */
export const sameSecret = (a: string, b: string): boolean =>
  timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest())

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>` +
  `<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}</style></head>` +
  `<body><h1>${title}</h1><p>${body}</p></body></html>`

const respond = (response: http.ServerResponse, status: number, html: string) => {
  response.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    // The one-time code was in this page's URL: never send it on as a referrer.
    "referrer-policy": "no-referrer",
    connection: "close"
  })
  response.end(html)
}

/** Starts the listener; it is closed when the scope closes. */
export const listen = (state: string): Effect.Effect<Listener, ReturnType<typeof failure>, Scope.Scope> =>
  Effect.gen(function*() {
    const done = yield* Deferred.make<LoginCallback>()
    const server = http.createServer((request, response) => {
      const url = new URL(request.url ?? "/", "http://127.0.0.1")
      if (request.method !== "GET" || url.pathname !== "/callback") {
        return respond(response, 404, page("Not found", "This is the grove login listener."))
      }
      const code = url.searchParams.get("code") ?? ""
      if (!sameSecret(url.searchParams.get("state") ?? "", state)) {
        return respond(
          response,
          400,
          page("Sign-in not accepted", "This sign-in does not belong to the <code>grove login</code> waiting on this machine. Run <code>grove login</code> again.")
        )
      }
      if (!CODE.test(code)) {
        return respond(response, 400, page("Sign-in not accepted", "The sign-in page sent no one-time code. Run <code>grove login</code> again."))
      }
      respond(response, 200, page("Signed in", "Sign-in received. You can close this tab and return to the terminal."))
      Deferred.doneUnsafe(done, Effect.succeed({ code }))
    })
    const port = yield* Effect.acquireRelease(
      Effect.callback<number, ReturnType<typeof failure>>((resume) => {
        server.once("error", (error) => resume(Effect.fail(failure(`cannot listen on 127.0.0.1 for the login callback: ${error.message}`))))
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      }),
      () =>
        Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )
    return { callbackUrl: `http://127.0.0.1:${port}/callback`, result: Deferred.await(done) }
  })
