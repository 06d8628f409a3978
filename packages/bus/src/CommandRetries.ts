/**
 * How a worker keeps at an attempt (a command's transaction, settling it, claiming its partition) until it
 * succeeds, following CommandFailures' policy: a lost database is waited for as long as it takes (the partition
 * reported stalled meanwhile), other transient errors are tried `maxAttempts` times, a poison failure is given up
 * at once, an interruption or a fence ends it.
 */
import { type Cause, Effect, Exit } from "effect"
import * as CommandFailures from "./CommandFailures.ts"
import type { PartitionHealth } from "./PartitionHealth.ts"

/**
 * For the worker of `partition` (reporting to `health`): runs `attempt` until it succeeds, is fenced or
 * interrupted, or fails in a way that is no use retrying (`Poison`, with the reason). A lost database is waited
 * for as long as it takes, and reported as a stall meanwhile; other transient errors are tried `maxAttempts` times.
 */
export const persistent = (health: PartitionHealth, partition: number) =>
  <A, R>(what: string, attempt: Effect.Effect<A, unknown, R>) =>
    Effect.gen(function*() {
      for (let tries = 0, counted = 0;; tries++) {
        const exit = yield* Effect.exit(attempt)
        if (Exit.isSuccess(exit)) {
          if (tries > 0) health.recovered(partition)
          return { _tag: "Done", value: exit.value } as const
        }
        const verdict = CommandFailures.classify(exit.cause)
        switch (verdict._tag) {
          case "Interrupted":
            return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
          case "Fenced":
            return yield* verdict.fenced
          case "Poison":
            if (tries > 0) health.recovered(partition)
            return { _tag: "Poison", message: verdict.message } as const
          case "Transient": {
            health.stalled(partition, verdict.message)
            // A lost connection is never the command's doing (after a database restart the pool may hand
            // out several dead connections in a row): waited out, however long. Only other transient
            // errors (serialization, deadlock, timeouts) count towards settling the command as failed.
            if (!verdict.connection) counted++
            if (counted >= CommandFailures.maxAttempts) {
              health.recovered(partition)
              return { _tag: "Poison", message: `${verdict.message} (${counted} attempts)` } as const
            }
            // One line per run of failures and then every 20th: an outage must not flood the log.
            if (tries % 20 === 0) yield* Effect.logWarning(`${what} failed; retrying`, { error: verdict.message, tries })
            yield* Effect.sleep(CommandFailures.backoff(tries))
          }
        }
      }
    })
