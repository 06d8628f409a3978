import { ApiErrors, ApiSchemas, GroveApi } from "@grove/api"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { HttpApi, type HttpApiGroup } from "effect/http-api"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { closedPort, repository } from "../test/support.ts"
import type { Credential } from "./CredentialResolver.ts"
import { connectWith, exitCodeForStatus, groupApi, groupDefinitions, IdempotencyKey, makeClient, toFailure } from "./Client.ts"
import { CliFailure, ExitCode } from "./Failures.ts"

const checkoutKey: Credential = { source: "checkout", token: "grove_k", location: "/w/.grove/config.json" }
const context = { remote: "http://h:1", credential: Option.some(checkoutKey) }
const anonymous = { remote: "http://h:1", credential: Option.none() }

type Route = (request: http.IncomingMessage) => { status: number; body?: unknown; raw?: string }

/**
 * A stand-in server with canned answers, for what the real one cannot be made to
 * answer on demand (202 pending writes, a 500, a proxy's HTML 502).
 */
const cannedServer = (route: Route) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; requests: Array<http.IncomingMessage>; server: http.Server }>((resolve) => {
        const requests: Array<http.IncomingMessage> = []
        const server = http.createServer((request, response) => {
          requests.push(request)
          const answer = route(request)
          const text = answer.raw ?? (answer.body === undefined ? "" : JSON.stringify(answer.body))
          response.writeHead(answer.status, { "content-type": answer.raw === undefined ? "application/json" : "text/html" })
          response.end(text)
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resolve({ url: `http://127.0.0.1:${port}`, requests, server })
        })
      })
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

const failureOf = <A>(exit: Exit.Exit<A, CliFailure>): CliFailure => {
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  const error = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (error === undefined || error._tag !== "Fail") throw new Error(`no failure in ${String(exit.cause)}`)
  return error.error
}

describe("Client error mapping", () => {
  it("401 is exit 6 (sign in again); every other refusal is exit 1", () => {
    expect(exitCodeForStatus(401)).toBe(ExitCode.auth)
    for (const status of [400, 403, 404, 409, 412, 413, 500, 502, 503]) expect(exitCodeForStatus(status)).toBe(ExitCode.error)
  })

  it.effect("the client has every group of the API, each built when first used and then kept", () =>
    Effect.gen(function*() {
      const client = yield* makeClient("http://h:1", undefined)
      expect(Object.keys(client).sort()).toEqual(Object.keys(GroveApi.groups).sort())
      // Not built yet: a getter, not a value (a command pays only for the groups it uses).
      const descriptor = Object.getOwnPropertyDescriptor(client, "repos")
      expect({ get: typeof descriptor?.get, value: descriptor?.value }).toEqual({ get: "function", value: undefined })
      expect(Object.keys(client.repos).sort()).toEqual(Object.keys(GroveApi.groups.repos.endpoints).sort())
      expect(client.repos).toBe(client.repos)
    }))

  it.effect("maps the API's error classes by status, keeping the server's message and code", () =>
    Effect.gen(function*() {
      const unauthorized = yield* toFailure(new ApiErrors.Unauthorized({ error: "token expired" }), anonymous)
      expect(unauthorized).toMatchObject({ exitCode: 6, code: "unauthorized" })
      expect(unauthorized.message).toBe("token expired (not signed in to http://h:1: run grove login)")

      const rejectedKey = yield* toFailure(new ApiErrors.Unauthorized({ error: "bad token", code: "revoked" }), context)
      expect(rejectedKey.code).toBe("revoked")
      expect(rejectedKey.message).toContain("sent the key stored in the checkout (/w/.grove/config.json)")

      const forbidden = yield* toFailure(new ApiErrors.Forbidden({ error: "missing scope write", scope: "write" }), anonymous)
      expect(forbidden).toMatchObject({ exitCode: 1, code: "forbidden", message: "missing scope write" })
      expect(forbidden.details).toEqual({ status: 403, scope: "write" })

      const missing = yield* toFailure(new ApiErrors.NotFound({ error: "no such repository" }), context)
      expect(missing.exitCode).toBe(1)
      expect(missing.message).toContain("a stale key can make a repository appear missing")

      const conflict = yield* toFailure(new ApiErrors.Conflict({ error: "exists", code: "name_taken" }), anonymous)
      expect(conflict).toMatchObject({ exitCode: 1, code: "name_taken", message: "exists" })

      const busy = yield* toFailure(new ApiErrors.ServiceUnavailable({ error: "busy", retryable: true }), anonymous)
      expect(busy).toMatchObject({ exitCode: 1, code: "unavailable", details: { status: 503, retryable: true } })
    }))

  it.live("cannot connect is exit 6 with code network", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const remote = `http://127.0.0.1:${port}`
      const connection = yield* connectWith({ remote, credential: Option.none(), passed: [] })
      const failure = failureOf(yield* Effect.exit(connection.call(connection.client.system.version())))
      expect(failure).toMatchObject({ exitCode: 6, code: "network" })
      expect(failure.message).toMatch(new RegExp(`^cannot connect to ${remote}`))
    }))

  it.live("undeclared statuses: the body's error when it has one, else the status", () =>
    Effect.gen(function*() {
      const server = yield* cannedServer((request) =>
        request.url === "/api/version"
          ? { status: 500, body: { error: "database exploded" } }
          : { status: 502, raw: "<html>Bad gateway</html>" }
      )
      const connection = yield* connectWith({ remote: server.url, credential: Option.none(), passed: [] })
      const boom = failureOf(yield* Effect.exit(connection.call(connection.client.system.version())))
      expect(boom).toMatchObject({ exitCode: 1, code: "http_500", message: "database exploded" })
      const gateway = failureOf(yield* Effect.exit(connection.call(connection.client.system.whoami())))
      expect(gateway).toMatchObject({ exitCode: 1, code: "http_502", message: "the server answered HTTP 502" })
    }))

  it.live("sends the chosen token as a bearer token, and none without a credential", () =>
    Effect.gen(function*() {
      const server = yield* cannedServer(() => ({ status: 200, body: { version: "0.1.0", mode: "embedded", node_id: "n" } }))
      const signed = yield* connectWith({ remote: server.url, credential: Option.some(checkoutKey), passed: [] })
      yield* signed.call(signed.client.system.version())
      const anonymousConnection = yield* connectWith({ remote: server.url, credential: Option.none(), passed: [] })
      yield* anonymousConnection.call(anonymousConnection.client.system.version())
      expect(server.requests.map((r) => r.headers.authorization)).toEqual(["Bearer grove_k", undefined])
    }))
})

describe("Client's groups", () => {
  /** Each endpoint as the client calls it: method, path, middleware and the parse options its annotations give. */
  // The parse options an endpoint's annotations give: HttpApi.js has the reader, its .d.ts does not export it.
  const slotParseOptions = (HttpApi as unknown as { readonly getSlotParseOptions: (annotations: unknown) => unknown }).getSlotParseOptions
  const endpointsOf = <Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<string, Groups>) => {
    const found: Array<unknown> = []
    HttpApi.reflect(api, {
      onGroup: () => undefined,
      onEndpoint: ({ endpoint, group, mergedAnnotations, middleware }) =>
        found.push({
          group: group.identifier,
          endpoint: endpoint.identifier,
          method: endpoint.method,
          path: endpoint.path,
          middleware: [...middleware].map((m) => m.key),
          parse: slotParseOptions(mergedAnnotations)
        })
    })
    return found
  }

  it("are GroveApi's groups, each built alone as GroveApi serves it (the rarely called ones loaded when first called)", async () => {
    expect(Object.keys(groupDefinitions).sort()).toEqual(Object.keys(GroveApi.groups).sort())
    for (const [name, definition] of Object.entries(groupDefinitions)) {
      const group = "load" in definition ? await definition.load() : definition
      const alone = endpointsOf(groupApi(group))
      expect(alone.length).toBeGreaterThan(0)
      expect({ name, alone }).toEqual({ name, alone: endpointsOf(GroveApi).filter((e) => (e as { group: string }).group === name) })
    }
  })

  it.live("a rarely called group's method loads its group, then calls as the group's own", () =>
    Effect.gen(function*() {
      const server = yield* cannedServer((request) =>
        request.url === "/api/orgs" ? { status: 200, body: { organizations: [] } } : { status: 404, body: { error: "not found" } }
      )
      const client = yield* makeClient(server.url, "grove_t")
      expect(yield* client.orgs.list({ query: {} })).toEqual({ organizations: [] })
      expect(server.requests.map((r) => [r.method, r.url, r.headers.authorization])).toEqual([["GET", "/api/orgs", "Bearer grove_t"]])
      // Not a promise's `then` (awaiting the group would take it for one).
      expect((client.orgs as unknown as { then?: unknown }).then).toBeUndefined()
    }))
})

describe("Client writes answered with 202", () => {
  const pendingServer = (operation: (poll: number) => unknown) => {
    let polls = 0
    return cannedServer((request) => {
      if (request.method === "POST" && request.url === "/api/repos") {
        return { status: 202, body: { error: "still working", code: "operation_pending", operation_id: "op-1" } }
      }
      if (request.url === "/api/operations/op-1") return { status: 200, body: operation(++polls) }
      return { status: 404, body: { error: "not found" } }
    })
  }
  const create = (url: string) =>
    Effect.gen(function*() {
      const connection = yield* connectWith({ remote: url, credential: Option.none(), passed: [] })
      return yield* connection.write(
        connection.client.repos.create({ payload: { name: "demo" } }),
        ApiSchemas.Repository,
        { attempts: 3, interval: "10 millis" }
      )
    })

  it.live("polls the operation until it is done and decodes its response", () =>
    Effect.gen(function*() {
      const server = yield* pendingServer((poll) =>
        poll < 2 ? { id: "op-1", status: "pending" } : { id: "op-1", status: "done", http_status: 201, response: repository }
      )
      expect(yield* create(server.url)).toEqual(repository)
      expect(server.requests.filter((r) => r.url === "/api/operations/op-1")).toHaveLength(2)
    }))

  it.live("a finished operation that failed fails with its error body", () =>
    Effect.gen(function*() {
      const server = yield* pendingServer(() => ({
        id: "op-1",
        status: "done",
        http_status: 409,
        response: { error: "repository alice/demo exists", code: "name_taken" }
      }))
      const failure = failureOf(yield* Effect.exit(create(server.url)))
      expect(failure).toMatchObject({ exitCode: 1, code: "name_taken", message: "repository alice/demo exists" })
    }))

  it.live("still pending after the last poll: fails with the operation id", () =>
    Effect.gen(function*() {
      const server = yield* pendingServer(() => ({ id: "op-1", status: "pending" }))
      const failure = failureOf(yield* Effect.exit(create(server.url)))
      expect(failure).toMatchObject({ exitCode: 1, code: "operation_pending", details: { operation_id: "op-1" } })
      expect(failure.message).toContain("operation op-1")
      expect(server.requests.filter((r) => r.url === "/api/operations/op-1")).toHaveLength(3)
    }))
})

describe("Client retries what the server never took", () => {
  const version = { version: "0.1.0", mode: "embedded", node_id: "n" }

  it.live("a refused connection is tried again: a node that comes up within the retries answers", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const connection = yield* connectWith({ remote: `http://127.0.0.1:${port}`, credential: Option.none(), passed: [] })
      // The node listens only after the first tries were refused.
      const late = http.createServer((_request, response) => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify(version))
      })
      const timer = setTimeout(() => late.listen(port, "127.0.0.1"), 250)
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => new Promise<void>((resolve) => (clearTimeout(timer), late.close(() => resolve()), late.closeAllConnections())))
      )
      expect(yield* connection.call(connection.client.system.version())).toMatchObject({ version: "0.1.0" })
    }).pipe(Effect.scoped))

  it.live("503 is tried again, for writes too; the answer after it counts", () =>
    Effect.gen(function*() {
      let calls = 0
      const server = yield* cannedServer(() =>
        ++calls <= 2 ? { status: 503, body: { error: "draining", code: "unavailable" } } : { status: 201, body: repository }
      )
      const connection = yield* connectWith({ remote: server.url, credential: Option.none(), passed: [] })
      expect(yield* connection.write(connection.client.repos.create({ payload: { name: "demo" } }), ApiSchemas.Repository)).toEqual(repository)
      expect(server.requests.map((r) => r.method)).toEqual(["POST", "POST", "POST"])
    }))

  /** A server that drops the connection of the first request it reads, and answers the rest. */
  const droppingFirst = () => {
    let seen = 0
    return cannedServer(() => ({ status: 201, body: repository })).pipe(
      Effect.tap(({ server }) =>
        Effect.sync(() =>
          server.prependListener("request", (request: http.IncomingMessage) => {
            if (++seen === 1) request.socket.destroy()
          })
        )
      )
    )
  }

  it.live("a connection broken after a write was sent: not sent again without an Idempotency-Key", () =>
    Effect.gen(function*() {
      const server = yield* droppingFirst()
      const connection = yield* connectWith({ remote: server.url, credential: Option.none(), passed: [] })
      const failure = failureOf(yield* Effect.exit(connection.call(connection.client.repos.create({ payload: { name: "demo" } }))))
      expect(failure).toMatchObject({ exitCode: 6, code: "network" })
      expect(server.requests).toHaveLength(1)
    }))

  it.live("... and sent again with one (the server replays or applies it once)", () =>
    Effect.gen(function*() {
      const server = yield* droppingFirst()
      const connection = yield* connectWith({ remote: server.url, credential: Option.none(), passed: [] })
      const created = yield* connection.call(connection.client.repos.create({ payload: { name: "demo" } })).pipe(
        Effect.provideService(IdempotencyKey, "key-1")
      )
      expect(created).toEqual(repository)
      expect(server.requests.map((r) => r.headers["idempotency-key"])).toEqual(["key-1", "key-1"])
    }))
})
