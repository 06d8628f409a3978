/**
 * A run's job cleanups after its Finish (Runner's cleanUpAfter): one that fails or dies does not skip the
 * later ones (their checkouts and host users would stay taken until the node restarts), and closing the
 * scope they run in (the node stopping) waits for them.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { cleanUpAfter } from "./Runner.ts"

describe("Runner.cleanUpAfter", () => {
  it.live("runs every cleanup though one fails and one dies, and the scope's close waits for them", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const done: Array<string> = []
      yield* cleanUpAfter([
        Effect.sync(() => done.push("first")),
        Effect.die(new Error("a removal that died")),
        Effect.fail("a close that failed") as unknown as Effect.Effect<void>,
        // Still under way when the scope is closed: the close waits for it rather than interrupting it.
        Effect.sleep("200 millis").pipe(Effect.andThen(Effect.sync(() => done.push("slow")))),
        Effect.sync(() => done.push("last"))
      ], scope)
      yield* Scope.close(scope, Exit.void)
      expect(done).toEqual(["first", "slow", "last"])
    }))
})
