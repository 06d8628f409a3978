/**
 * The binary routes (pull, chunks/fetch, chunks/batch, a run's log) try a 503 again as the typed client does
 * (Retry.ts): a draining or busy node did not act on the request. Past the Retry-After limit, after the last try,
 * or for any other refusal, the answer is the failure.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { connectWith } from "../Client.ts"
import { CliFailure } from "../Failures.ts"
import { pull } from "./Fetch.ts"
import { repoRemote } from "./RemoteRepo.ts"

interface Canned {
  readonly status: number
  readonly headers?: Record<string, string>
  readonly body: string
}

const EMPTY_PULL = JSON.stringify({ head: null, branch: null, branches: [], commits: [], blobs: [], trees: [] })
const draining = (retryAfter: string | undefined): Canned => ({
  status: 503,
  headers: retryAfter === undefined ? {} : { "retry-after": retryAfter },
  body: JSON.stringify({ error: "draining", code: "unavailable" })
})

/** A server giving `answers` in turn (the last one from then on); `seen` lists "METHOD path" of each request. */
const serving = (answers: ReadonlyArray<Canned>) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: http.Server; readonly seen: Array<string> }>((resume) => {
      const seen: Array<string> = []
      const server = http.createServer((request, response) => {
        request.resume()
        request.on("end", () => {
          const answer = answers[Math.min(seen.length, answers.length - 1)]!
          seen.push(`${request.method} ${request.url?.split("?")[0]}`)
          response.writeHead(answer.status, { "content-type": "application/json", ...answer.headers })
          response.end(answer.body)
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, seen })))
    }),
    ({ server }) => Effect.callback<void>((resume) => (server.close(() => resume(Effect.void)), server.closeAllConnections()))
  ).pipe(
    Effect.flatMap(({ server, seen }) =>
      Effect.map(
        connectWith({ remote: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, credential: Option.none(), passed: [] }),
        (connection) => ({ remote: repoRemote(connection, "o", "r"), seen })
      )
    )
  )

const failureOf = <A>(exit: Exit.Exit<A, unknown>) => {
  if (Exit.isSuccess(exit)) return "success"
  const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")?.error
  return error instanceof CliFailure ? { code: error.code, message: error.message } : String(error)
}

describe("RemoteRepo retries", () => {
  it.live("a pull answered 503 (draining, Retry-After 0) is asked again and the next answer counts", () =>
    Effect.gen(function*() {
      const { remote, seen } = yield* serving([draining("0"), { status: 200, body: EMPTY_PULL }])
      const answer = yield* pull(remote, "main", "a".repeat(64))
      expect(answer).toMatchObject({ head: null, commits: [] })
      expect(seen).toEqual(["GET /api/o/r/pull", "GET /api/o/r/pull"])
    }).pipe(Effect.scoped))

  it.live("a chunk batch (POST) answered 503 without Retry-After is sent again; a streamed chunks/fetch is taken once", () =>
    Effect.gen(function*() {
      const { remote, seen } = yield* serving([draining(undefined), { status: 200, body: "{}" }, draining("0"), { status: 200, body: "abc" }])
      const batch = yield* Effect.promise(() => remote.sendBinary("chunks/batch", { method: "POST", body: new Uint8Array([1, 2, 3]) }))
      expect(batch.status).toBe(200)
      const parts: Array<string> = []
      const fetched = yield* Effect.promise(() =>
        remote.sendBinary("chunks/fetch", {
          method: "POST",
          body: "[]",
          stream: () => ({ part: (part) => void parts.push(Buffer.from(part).toString()), done: () => parts.push("done") })
        })
      )
      expect(fetched.status).toBe(200)
      expect(parts.join("")).toBe("abcdone")
      expect(seen).toEqual(["POST /api/o/r/chunks/batch", "POST /api/o/r/chunks/batch", "POST /api/o/r/chunks/fetch", "POST /api/o/r/chunks/fetch"])
    }).pipe(Effect.scoped))

  it.live("a run's log (fetch) answered 503 is asked again", () =>
    Effect.gen(function*() {
      const { remote, seen } = yield* serving([draining("0"), { status: 200, body: "log line" }])
      const text = yield* Effect.promise(() => remote.binary("ci/runs/1/logs", { method: "GET" }).then((response) => response.text()))
      expect(text).toBe("log line")
      expect(seen).toHaveLength(2)
    }).pipe(Effect.scoped))

  it.live("not tried again: a 503 asking for longer than 2 s, any other refusal; a 503 to the last of five tries is the answer", () =>
    Effect.gen(function*() {
      const long = yield* serving([draining("5"), { status: 200, body: EMPTY_PULL }])
      expect(failureOf(yield* Effect.exit(pull(long.remote, "main", "a".repeat(64))))).toMatchObject({ code: "unavailable", message: "draining" })
      expect(long.seen).toHaveLength(1)

      const broken = yield* serving([{ status: 500, body: JSON.stringify({ error: "boom" }) }, { status: 200, body: "{}" }])
      const refused = yield* Effect.exit(Effect.tryPromise(() => broken.remote.sendBinary("chunks/batch", { method: "POST", body: "x" })))
      expect(refused._tag).toBe("Failure")
      expect(broken.seen).toHaveLength(1)

      const always = yield* serving([draining("0")])
      expect(failureOf(yield* Effect.exit(pull(always.remote, "main", "a".repeat(64))))).toMatchObject({ code: "unavailable" })
      expect(always.seen).toHaveLength(5)
    }).pipe(Effect.scoped), 20_000)
})
