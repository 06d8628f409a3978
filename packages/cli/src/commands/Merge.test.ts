/**
 * `landMerge` against a stand-in server: the CI gate (412) cannot be produced by
 * a real embedded server yet (CI records come with a later issue), so the wait
 * loop and the messages are checked here.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Option } from "effect"
import { scriptedServer } from "../../test/support.ts"
import { connectWith } from "../Client.ts"
import type { CliFailure } from "../Failures.ts"
import { ExitCode } from "../Failures.ts"
import { landMerge } from "./Merge.ts"

const merged = { message: "m", commit_hash: "c".repeat(64), manifest_hash: "d".repeat(64), merge_parent_hash: "e".repeat(64) }
const running = { status: 412, body: { error: "CI is running on the branch head", code: "ci_running" } }

const run = (url: string, wait: Option.Option<Duration.Duration>) =>
  Effect.gen(function*() {
    const { call, client } = yield* connectWith({ remote: url, credential: Option.none(), passed: [] })
    const waited: Array<string> = []
    const exit = yield* Effect.exit(landMerge(
      "feature",
      call(client.merges.merge({ params: { owner: "o", name: "n", branch: "feature" }, query: {} })),
      { wait, interval: Duration.millis(20), onWait: (error) => Effect.sync(() => void waited.push(error.code)) }
    ))
    return { exit, waited }
  })

const failureOf = (exit: Exit.Exit<unknown, CliFailure>): CliFailure => {
  const reason = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
  if (reason?._tag !== "Fail") throw new Error("expected a failure")
  return reason.error
}

describe("landMerge", () => {
  it.live("412 without --wait: exit 1 naming the CI state and the next commands, one request", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer([running, { status: 200, body: merged }])
      const { exit, waited } = yield* run(server.url, Option.none())
      const error = failureOf(exit)
      expect(error.exitCode).toBe(ExitCode.error)
      expect(error.code).toBe("ci_running")
      expect(error.message).toContain("CI on feature is still running")
      expect(error.message).toContain("grove merge --wait")
      expect(error.message).toContain("grove merge --force")
      expect(server.keys).toHaveLength(1)
      expect(waited).toEqual([])
    }).pipe(Effect.scoped))

  it.live("412 with --wait: retried until the merge lands", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer([running, running, { status: 200, body: merged }])
      const { exit, waited } = yield* run(server.url, Option.some(Duration.minutes(1)))
      expect(Exit.isSuccess(exit) && exit.value.commit_hash).toBe(merged.commit_hash)
      expect(server.keys).toHaveLength(3)
      expect(waited).toEqual(["ci_running"])
    }).pipe(Effect.scoped))

  it.live("412 with a wait that runs out: exit 1, says nothing was merged", () =>
    Effect.gen(function*() {
      const server = yield* scriptedServer([{ status: 412, body: { error: "CI failed", code: "ci_failing" } }])
      const { exit } = yield* run(server.url, Option.some(Duration.millis(50)))
      const error = failureOf(exit)
      expect(error.exitCode).toBe(ExitCode.error)
      expect(error.message).toMatch(/CI on feature is failing and the wait ran out; nothing was merged/)
      expect(server.keys.length).toBeGreaterThanOrEqual(1)
    }).pipe(Effect.scoped))

  it.live("409 conflict: exit 5 with the paths; 400 already merged: exit 1 with grove switch -c", () =>
    Effect.gen(function*() {
      const conflict = yield* scriptedServer([{ status: 409, body: { error: "conflicts", code: "conflict", conflict_paths: ["a.txt", "b/c.txt"] } }])
      const c = failureOf((yield* run(conflict.url, Option.none())).exit)
      expect(c.exitCode).toBe(ExitCode.conflict)
      expect(c.message).toContain("feature conflicts with main in 2 file(s):\n  a.txt\n  b/c.txt\n")
      expect(c.message).toContain("Run grove pull to merge main into your branch, resolve the conflicts, grove push, then grove merge.")
      expect(c.details).toMatchObject({ conflict_paths: ["a.txt", "b/c.txt"], status: 409 })

      const done = yield* scriptedServer([{ status: 400, body: { error: "already merged", code: "already_merged" } }])
      const d = failureOf((yield* run(done.url, Option.none())).exit)
      expect(d.exitCode).toBe(ExitCode.error)
      expect(d.message).toBe("feature is already merged into main. Start new work with grove switch -c")
    }).pipe(Effect.scoped))
})
