/**
 * The retry rules of merge/sync/revert calls, against a stand-in server: the real
 * one cannot be made to answer `main_moved` or drop a connection on demand.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { scriptedServer } from "../../test/support.ts"
import { connectWith } from "../Client.ts"
import { landing, MOVED_ATTEMPTS } from "./Land.ts"

const merged = {
  message: "m",
  commit_hash: "c".repeat(64),
  manifest_hash: "d".repeat(64),
  merge_parent_hash: "e".repeat(64)
}
const moved = { status: 409, body: { error: "main moved", code: "main_moved", retryable: true } }

const mergeThrough = (url: string) =>
  Effect.gen(function*() {
    const { call, client } = yield* connectWith({ remote: url, credential: Option.none(), passed: [] })
    return yield* Effect.exit(landing(call(client.merges.merge({ params: { owner: "o", name: "n", branch: "b" }, query: {} }))))
  })

describe("landing", () => {
  it.live("retries main_moved with a new Idempotency-Key per attempt", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer([moved, moved, { status: 200, body: merged }])
      const exit = yield* mergeThrough(server.url)
      expect(Exit.isSuccess(exit) && exit.value.commit_hash).toBe(merged.commit_hash)
      expect(server.keys).toHaveLength(3)
      expect(server.keys.every((k) => typeof k === "string" && k.length > 0)).toBe(true)
      expect(new Set(server.keys).size).toBe(3)
    }).pipe(Effect.scoped))

  it.live("gives up after MOVED_ATTEMPTS with the server's retryable answer", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer([moved])
      const exit = yield* mergeThrough(server.url)
      expect(Exit.isFailure(exit)).toBe(true)
      const failure = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
      expect(failure?._tag === "Fail" && failure.error).toMatchObject({ code: "main_moved", details: { retryable: true } })
      expect(server.keys).toHaveLength(MOVED_ATTEMPTS)
    }).pipe(Effect.scoped))

  it.live("a dropped connection is retried under the same key", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer(["drop", { status: 200, body: merged }])
      const exit = yield* mergeThrough(server.url)
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(server.keys).toHaveLength(2)
      expect(server.keys[0]).toBeDefined()
      expect(server.keys[1]).toBe(server.keys[0])
    }).pipe(Effect.scoped))

  it.live("conflicts and the CI gate are not retried", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer([
        { status: 412, body: { error: "CI is running", code: "ci_running" } },
        { status: 200, body: merged }
      ])
      const exit = yield* mergeThrough(server.url)
      expect(Exit.isFailure(exit)).toBe(true)
      expect(server.keys).toHaveLength(1)
    }).pipe(Effect.scoped))
})
