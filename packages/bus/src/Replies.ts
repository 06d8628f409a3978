/**
 * The requesting side of request/reply, shared by both buses: a table of
 * pending requests by correlation id, completed by the replies addressed to
 * this node and failed at their deadline.
 */
import { Clock, Deferred, Duration, Effect, Exit } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { type BusError, type BusRecord, type BusShape, Headers, type OutgoingRecord, type PendingReply, RequestTimeout } from "./Bus.ts"

interface Entry {
  readonly deferred: Deferred.Deferred<BusRecord, RequestTimeout>
  readonly timer: ReturnType<typeof setTimeout>
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

/** The longest delay setTimeout takes as such. */
const MAX_TIMER_MS = 2 ** 31 - 1

export const make = (nodeId: string): Effect.Effect<Replies, never, Scope.Scope> =>
  Effect.gen(function*() {
    const entries = new Map<string, Entry>()

    const settle = (correlationId: string, exit: Exit.Exit<BusRecord, RequestTimeout>) => {
      const entry = entries.get(correlationId)
      if (entry === undefined) return
      entries.delete(correlationId)
      clearTimeout(entry.timer)
      Deferred.doneUnsafe(entry.deferred, exit)
    }

    // The bus closes: no reply can come any more, and no timer may keep the process up until a deadline.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        // A copy of the ids: settling one may resume a waiter at once, which may register another.
        for (const correlationId of Array.from(entries.keys())) settle(correlationId, Exit.fail(new RequestTimeout({ correlationId })))
      })
    )

    const register: Replies["register"] = (timeout) =>
      Effect.gen(function*() {
        const correlationId = randomUUID()
        const millis = Duration.toMillis(Duration.fromInputUnsafe(timeout))
        const deadline = (yield* Clock.currentTimeMillis) + millis
        const deferred = Deferred.makeUnsafe<BusRecord, RequestTimeout>()
        // The deadline is one timer of the request's own, cleared by its reply: racing the wait against a
        // sleep forked two fibers per request, a good part of a command's own cost on the in-process bus.
        // A request nobody awaits is forgotten at its deadline too.
        // setTimeout fires at once past 2^31 - 1 ms (an infinite deadline among them): a longer one waits that long.
        const timer = setTimeout(() => settle(correlationId, Exit.fail(new RequestTimeout({ correlationId }))), Math.min(millis, MAX_TIMER_MS))
        entries.set(correlationId, { deferred, timer })
        const remove = Effect.sync(() => {
          const entry = entries.get(correlationId)
          if (entry === undefined) return
          entries.delete(correlationId)
          clearTimeout(entry.timer)
        })
        return {
          headers: {
            [Headers.correlationId]: correlationId,
            [Headers.replyTo]: nodeId,
            [Headers.deadline]: String(deadline)
          },
          pending: { correlationId, await: Deferred.await(deferred).pipe(Effect.ensuring(remove)) },
          cancel: remove
        }
      })

    const complete: Replies["complete"] = (record) =>
      Effect.sync(() => {
        const id = record.headers[Headers.correlationId]
        if (id !== undefined) settle(id, Exit.succeed(record))
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
