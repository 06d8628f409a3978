/**
 * How a start or trigger request queues its runs (CiHandlers): with a runner of this node reserved when one
 * is free, the command records the first run as started by this node (no Start command, no claim) and it runs
 * here at once; a reservation no run took (another request's reply replayed, an invalid workflow, a refusal) is
 * given back, and one whose answer did not come follows the command's outcome. Apart from the handlers so that
 * CiQueueStatements.test sends exactly what a request sends.
 */
import { EntityRuntime } from "@grove/bus"
import { Cause, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { branchKey } from "../content/BranchCommands.ts"
import type { WriteRequest } from "../entities/Sending.ts"
import { ciCommandFailure } from "./CiErrors.ts"
import { CiGateway } from "./CiGateway.ts"
import { FOLLOW_MARGIN_MS, outcomeOf, outcomeUnknown } from "./CiOutcome.ts"
import { Queued, type QueuePayload, startedFor } from "./CiQueueCommand.ts"
import { CiWake } from "./CiWake.ts"

const decodeQueued = Schema.decodeUnknownOption(Queued)

/**
 * queue(repoKey, branch, payload, headMoved, request): the command's reply. `headMoved` "undefined": a start
 * planned at the head this node last saw, which moved, answers undefined (planned again by the caller); "fail":
 * it fails as the API answers it (412). Not cut off by the caller going away: a run recorded as started here
 * must get its runner.
 */
export const makeStartQueue = (commandTimeoutMs: number) =>
  Effect.gen(function*() {
    const gateway = yield* CiGateway
    const wake = yield* CiWake
    const runtime = yield* EntityRuntime.EntityRuntime
    return (repoKey: string, branch: string, payload: Omit<typeof QueuePayload.Type, "startOn">, headMoved: "fail" | "undefined", request: WriteRequest) =>
      Effect.gen(function*() {
        const node = yield* wake.reserve
        // This request's own: a reply that names another's (a replay) is not run here again.
        const reservation = randomUUID()
        const until = Date.now() + commandTimeoutMs + FOLLOW_MARGIN_MS
        // With a reservation, known before sending, so an answer that does not come can be followed. A new one
        // (no Idempotency-Key) is still sent fresh: its inbox row is written in the command's transaction, not ahead.
        const followed = node === undefined ? undefined : request.commandId ?? randomUUID()
        const queued = yield* gateway.queue(
          branchKey(repoKey, branch),
          node === undefined ? payload : { ...payload, startOn: { node, reservation, until } },
          followed === undefined || request.commandId !== undefined ? request : { ...request, commandId: followed, fresh: true }
        ).pipe(
          Effect.onError((cause) => {
            if (followed === undefined) return Effect.void
            const error = Cause.findErrorOption(cause)
            // The command may still apply (no reply in time, or the bus's answer lost): its outcome decides.
            return Option.isSome(error) && outcomeUnknown(error.value)
              ? wake.follow(outcomeOf(runtime, followed, until, (value) => Option.match(decodeQueued(value), { onNone: () => undefined, onSome: (q) => startedFor(q, reservation) })), repoKey)
              : wake.release
          }),
          Effect.catch((error) => headMoved === "undefined" && error._tag === "CiHeadMoved" ? Effect.succeed(undefined) : ciCommandFailure(error))
        )
        // (Its reservation was given back as it failed.)
        if (queued === undefined) return undefined
        if (node !== undefined) {
          const started = startedFor(queued, reservation)
          yield* started === undefined ? wake.release : wake.run(started, repoKey)
        }
        // Runs left queued: this node's dispatcher looks for them now.
        if (!queued.replayed && queued.run_ids.some((id) => id !== queued.started)) yield* wake.wake
        return queued
      }).pipe(Effect.uninterruptible)
  })
