/**
 * The authentication layer while the database cannot be reached: a real PostgreSQL client
 * (`@effect/sql-pg`) pointed at a port where nothing answers, or at a server that drops every
 * connection, under the real Identity service and the real middlewares. A token that cannot be
 * checked is the server's trouble: 503 with `retryable: true`, never 401 (which clients take as
 * "your credentials are wrong" and stop).
 */
import { PgClient } from "@effect/sql-pg"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { ApiErrors, Authentication, CurrentCaller, RequestValidation } from "@grove/api"
import { Effect, Layer, Redacted, Schema } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import * as net from "node:net"
import { AccessCaches } from "../cache/AccessCaches.ts"
import { Identity } from "../access/Identity.ts"
import { InvalidToken, TokenExpired } from "../access/IdentityErrors.ts"
import * as Secrets from "../access/Secrets.ts"
import { AuthenticationLive, callerOf, RequestValidationLive } from "./Authentication.ts"
import { JsonErrorsLive } from "./JsonErrors.ts"
import { answer, requestCaller } from "./RawRoutes.ts"

/** One endpoint behind the same middlewares as every Grove endpoint. */
class ProbeGroup extends HttpApiGroup.make("probe").add(
  HttpApiEndpoint.get("whoami", "/whoami", { success: Schema.String })
) {}
class ProbeApi extends HttpApi.make("probe").add(ProbeGroup).middleware(Authentication).middleware(RequestValidation).prefix("/api") {}

const ProbeHandlers = HttpApiBuilder.group(ProbeApi, "probe", (handlers) =>
  handlers.handle("whoami", () =>
    Effect.gen(function*() {
      return (yield* CurrentCaller).principal.kind
    })))

/** A raw route (binary chunks, raw files, git export) resolves its caller the same way. */
const RawProbe = HttpRouter.add(
  "GET",
  "/raw-whoami",
  answer(Effect.map(requestCaller, (caller) => HttpServerResponse.text(caller.principal.kind)))
)

const app = (port: number) => {
  const database = PgClient.layer({ url: Redacted.make(`postgres://grove:grove@127.0.0.1:${port}/grove`), connectTimeout: "2 seconds" })
  const identity = Identity.layer.pipe(Layer.provide([database, AccessCaches.layer]))
  const api = HttpApiBuilder.layer(ProbeApi).pipe(
    Layer.provide(ProbeHandlers),
    Layer.provide([AuthenticationLive, RequestValidationLive]),
    Layer.provide(HttpServer.layerServices)
  )
  return HttpRouter.toWebHandler(Layer.mergeAll(api, RawProbe, JsonErrorsLive).pipe(Layer.provideMerge(identity)), { disableLogger: true })
}

const listen = (server: net.Server) =>
  new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))

/** A port nothing listens on: bound, then released. */
const closedPort = async () => {
  const server = net.createServer()
  const port = await listen(server)
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** A "database" that accepts connections and drops them at once, as PostgreSQL does while it shuts down. */
const dropping = net.createServer((socket) => socket.destroy())

let refusedPort: number
let droppingPort: number

beforeAll(async () => {
  refusedPort = await closedPort()
  droppingPort = await listen(dropping)
})

afterAll(async () => {
  await new Promise<void>((resolve) => dropping.close(() => resolve()))
})

const call = async (port: number, path: string, headers: Record<string, string>) => {
  const { handler, dispose } = app(port)
  try {
    const response = await handler(new Request(`http://localhost${path}`, { headers }))
    const text = await response.text()
    return { status: response.status, body: JSON.parse(text) as unknown, type: response.headers.get("content-type") }
  } finally {
    await dispose()
  }
}

describe("authentication while the database is unreachable", () => {
  for (const [label, port] of [["nothing listens", () => refusedPort], ["connections are dropped", () => droppingPort]] as const) {
    for (const path of ["/api/whoami", "/raw-whoami"]) {
      it(`answers 503 retryable, not 401, for a token it cannot check (${label}, ${path})`, async () => {
        const reply = await call(port(), path, { authorization: `Bearer ${Secrets.newToken()}` })
        expect(reply.status).toBe(503)
        expect(reply.type).toContain("application/json")
        expect(reply.body).toEqual({ error: "could not check the token right now; try again", code: "auth_unavailable", retryable: true })
      }, 30_000)
    }
  }

  it("still answers anonymous requests, which need no lookup, and 401 for a malformed header", async () => {
    const { handler, dispose } = app(refusedPort)
    try {
      const response = await handler(new Request("http://localhost/api/whoami"))
      expect(response.status).toBe(200)
      expect(await response.json()).toBe("anonymous")
      const malformed = await handler(new Request("http://localhost/api/whoami", { headers: { authorization: "Basic abc" } }))
      expect(malformed.status).toBe(401)
      expect(await malformed.json()).toMatchObject({ code: "bad_authorization" })
    } finally {
      await dispose()
    }
  })
})

describe("callerOf", () => {
  const failingWith = (error: InvalidToken | TokenExpired) =>
    callerOf({ authenticate: () => Effect.fail(error) } as unknown as Identity["Service"], `Bearer ${Secrets.newToken()}`).pipe(
      Effect.flip,
      Effect.runPromise
    )

  it("answers an expired token with 401 token_expired, and any other bad token with 401 invalid_token", async () => {
    const expired = await failingWith(new TokenExpired())
    expect(expired).toBeInstanceOf(ApiErrors.Unauthorized)
    expect(expired).toMatchObject({ code: "token_expired" })
    const invalid = await failingWith(new InvalidToken())
    expect(invalid).toBeInstanceOf(ApiErrors.Unauthorized)
    expect(invalid).toMatchObject({ code: "invalid_token" })
  })
})
