/**
 * A write that times out is tried again once by the client (Retry.ts), not once more per `attempt` on top: a silent
 * server is not waited out six times (C4's F2: six push requests, 181 s, then a failure for a push that had landed).
 * Its own file: the bounds are read from the environment once per process, and they are short here.
 */
process.env["GROVE_IDLE_TIMEOUT"] = "2"
process.env["GROVE_WRITE_TIMEOUT"] = "2"

import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { scriptedServer } from "../../test/support.ts"
import { connectWith } from "../Client.ts"
import { landing } from "./Land.ts"

describe("landing a write the server never answers", () => {
  it.live("is sent twice under one key, then fails as a network failure", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer(["silent"])
      const { call, client } = yield* connectWith({ remote: server.url, credential: Option.none(), passed: [] })
      const exit = yield* Effect.exit(landing(call(client.merges.merge({ params: { owner: "o", name: "n", branch: "b" }, query: {} }))))
      expect(Exit.isFailure(exit) && exit.cause.reasons.length > 0).toBe(true)
      const failure = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
      expect(failure !== undefined && failure._tag === "Fail" && (failure.error as { code?: string }).code).toBe("network")
      expect(server.keys).toHaveLength(2)
      expect(new Set(server.keys).size).toBe(1)
    }).pipe(Effect.scoped), 60_000)
})
