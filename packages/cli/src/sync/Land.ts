/**
 * Calling the writes that move heads on the server (merge, sync, revert):
 * each attempt gets its own `Idempotency-Key`, a network failure of one attempt
 * is retried under the same key (the server replays the answer if the first
 * request ran), and a 409 `retryable` answer (main or the branch moved between
 * the server's read and its commit; nothing landed) is tried again as a new
 * attempt.
 */
import { Duration, Effect, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import { IdempotencyKey } from "../Client.ts"
import type { CliFailure } from "../Failures.ts"

/** How many times `landing` tries a request that keeps answering "moved, retry". */
export const MOVED_ATTEMPTS = 5

/** The HTTP status the server answered with, when the failure came from an answer. */
export const statusOf = (error: CliFailure): number | undefined => {
  const status = error.details?.["status"]
  return typeof status === "number" ? status : undefined
}

/** 409 main_moved / branch_moved: nothing changed on the server, the same request may succeed now. */
export const isMoved = (error: CliFailure): boolean =>
  statusOf(error) === 409 &&
  (error.details?.["retryable"] === true || error.code === "main_moved" || error.code === "branch_moved")

/** One attempt under a fresh key; lost connections are retried with that key. */
export const attempt = <A, R>(request: Effect.Effect<A, CliFailure, R>): Effect.Effect<A, CliFailure, R> =>
  Effect.suspend(() =>
    request.pipe(
      Effect.retry({
        schedule: Schedule.exponential(Duration.millis(200)),
        times: 2,
        // A timeout was already tried again once by the client (Retry.ts): a silent server is not waited out six times.
        while: (error) => error.code === "network" && error.timedOut !== true
      }),
      Effect.provideService(IdempotencyKey, randomUUID())
    )
  )

/** Attempts until the answer is not "moved" (at most `MOVED_ATTEMPTS`), with a short growing pause. */
export const landing = <A, R>(request: Effect.Effect<A, CliFailure, R>): Effect.Effect<A, CliFailure, R> =>
  attempt(request).pipe(
    Effect.retry({ schedule: Schedule.exponential(Duration.millis(50)), times: MOVED_ATTEMPTS - 1, while: isMoved })
  )

/** The `conflict_paths` of a 409 answer (empty when it has none). */
export const conflictPaths = (error: CliFailure): ReadonlyArray<string> => {
  const paths = error.details?.["conflict_paths"]
  return Array.isArray(paths) ? paths.filter((p): p is string => typeof p === "string") : []
}

/** Paths as an indented list, one a line. */
export const pathList = (paths: ReadonlyArray<string>): string => paths.map((p) => `  ${p}`).join("\n")
