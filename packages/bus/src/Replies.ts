/**
 * The requesting side of request/reply, shared by both buses: a table of
 * pending requests by correlation id, completed by the replies addressed to
 * this node and abandoned at their deadline.
 */
import { Clock, Deferred, Duration, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { type BusError, type BusRecord, type BusShape, Headers, type OutgoingRecord, type PendingReply, RequestTimeout } from "./Bus.ts"

interface Entry {
  readonly deferred: Deferred.Deferred<BusRecord>
  readonly deadline: number
}

export interface Replies {
  /** Registers a request; `headers` go on the request record. */
  readonly register: (timeout: Duration.Input) => Effect.Effect<{
    readonly headers: Readonly<Record<string, string>>
    readonly pending: PendingReply
    readonly cancel: Effect.Effect<void>
  }>
  /** Hands a reply record to its waiting request; replies nobody waits for are dropped. */
  readonly complete: (record: BusRecord) => Effect.Effect<void>
}

/** Entries whose requester never awaited them are swept this long after their deadline. */
const SWEEP_EVERY = Duration.seconds(30)

export const make = (nodeId: string): Effect.Effect<Replies, never, Scope.Scope> =>
  Effect.gen(function*() {
    const entries = new Map<string, Entry>()

    yield* Effect.forkScoped(
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        for (const [id, entry] of entries) if (entry.deadline < now) entries.delete(id)
      }).pipe(Effect.repeat(Schedule.spaced(SWEEP_EVERY)))
    )

    const register: Replies["register"] = (timeout) =>
      Effect.gen(function*() {
        const correlationId = randomUUID()
        const now = yield* Clock.currentTimeMillis
        const deadline = now + Duration.toMillis(timeout)
        const deferred = yield* Deferred.make<BusRecord>()
        entries.set(correlationId, { deferred, deadline })
        const remove = Effect.sync(() => {
          entries.delete(correlationId)
        })
        const awaitReply = Effect.gen(function*() {
          const remaining = deadline - (yield* Clock.currentTimeMillis)
          return yield* Deferred.await(deferred).pipe(
            Effect.timeoutOrElse({
              duration: Duration.millis(Math.max(0, remaining)),
              orElse: () => Effect.fail(new RequestTimeout({ correlationId }))
            })
          )
        }).pipe(Effect.ensuring(remove))
        return {
          headers: {
            [Headers.correlationId]: correlationId,
            [Headers.replyTo]: nodeId,
            [Headers.deadline]: String(deadline)
          },
          pending: { correlationId, await: awaitReply },
          cancel: remove
        }
      })

    const complete: Replies["complete"] = (record) =>
      Effect.suspend(() => {
        const id = record.headers[Headers.correlationId]
        const entry = id === undefined ? undefined : entries.get(id)
        return entry === undefined ? Effect.void : Deferred.succeed(entry.deferred, record).pipe(Effect.asVoid)
      })

    return { register, complete }
  })

/** The headers a reply to `request` carries, or `undefined` if it was not a request. */
export const replyRoute = (request: BusRecord): { readonly replyTo: string; readonly correlationId: string } | undefined => {
  const replyTo = request.headers[Headers.replyTo]
  const correlationId = request.headers[Headers.correlationId]
  return replyTo === undefined || correlationId === undefined ? undefined : { replyTo, correlationId }
}

/** `Bus.request` on top of a bus's `publish`: registers the request, then puts it on the bus with its reply headers. */
export const request = (
  replies: Replies,
  publish: (records: ReadonlyArray<OutgoingRecord>) => Effect.Effect<void, BusError>
): BusShape["request"] =>
(record, timeout) =>
  Effect.gen(function*() {
    const registration = yield* replies.register(timeout)
    yield* publish([{ ...record, headers: { ...record.headers, ...registration.headers } }]).pipe(
      Effect.onError(() => registration.cancel)
    )
    return registration.pending
  })
