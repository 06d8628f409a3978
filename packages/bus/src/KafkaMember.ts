/**
 * One consumer-group membership on Kafka that is kept, whatever happens to
 * the broker: a member whose stream ends or whose heartbeats stall (it is no
 * longer in the group, whether it knows it or not) is closed, and a new
 * consumer joins in its place, tried again with a capped backoff for as long
 * as it takes. A `Consumer` of `@platformatic/kafka` whose rejoin failed once
 * stays out of the group for good (it schedules no more heartbeats), so a
 * fresh one is the only sure way back.
 */
import type { Consumer, MessagesStream } from "@platformatic/kafka"
import { Deferred, Duration, Effect, Exit, Fiber, Scope } from "effect"
import { BusError } from "./Bus.ts"

// oxlint-disable-next-line typescript/no-explicit-any -- the key/value/header types do not matter here
type AnyConsumer = Consumer<any, any, any, any>
type StreamOf<C extends AnyConsumer> = C extends Consumer<infer K, infer V, infer HK, infer HV> ? MessagesStream<K, V, HK, HV>
  : never

export interface MemberOptions<C extends AnyConsumer> {
  /** In logs: what this membership is for. */
  readonly name: string
  readonly create: () => C
  /** Joins the group and opens the stream. */
  readonly open: (consumer: C) => Promise<StreamOf<C>>
  /** A join that takes longer than this failed. */
  readonly joinTimeout: Duration.Duration
  /** Reads the stream until it ends; answers why it ended. */
  readonly run: (consumer: C, stream: StreamOf<C>) => Effect.Effect<string>
  /** A member joined (after `open`, before `run`). */
  readonly joined: (consumer: C, stream: StreamOf<C>) => Effect.Effect<void>
  /** The member was lost: it owns nothing any more. Runs before it is closed. */
  readonly lost: (reason: string) => Effect.Effect<void>
  /** Completes when the broker answers again after an outage: the next attempt goes at once. */
  readonly recovered: Effect.Effect<void>
}

export interface Member<C extends AnyConsumer> {
  /** The member in the group now, if any. */
  readonly current: () => C | undefined
  /** Stops rejoining and closes the current member (it leaves the group). */
  readonly stop: Effect.Effect<void>
}

/**
 * How long a join may take: the other members rejoin within a heartbeat or two, and a join stuck on
 * a broker that went away must not hold the next attempt up for a whole rebalance timeout.
 */
export const joinTimeout = (options: { readonly rebalanceTimeout: Duration.Duration; readonly sessionTimeout: Duration.Duration }) =>
  Duration.sum(Duration.min(options.rebalanceTimeout, Duration.seconds(10)), options.sessionTimeout)

/**
 * Request timeout and retry pause of every Kafka client here. The client's defaults (5 s, retried 3 times
 * 1 s apart) held a send on a connection the broker's restart had cut for up to 24 s.
 */
export const clientTimeouts = { timeout: 3000, retryDelay: 250 } as const

/** The wait before rejoin attempt `attempt` (0-based): 0.5 s doubling, at most 10 s. */
export const rejoinBackoff = (attempt: number): Duration.Duration =>
  Duration.millis(Math.min(10_000, 500 * 2 ** Math.min(attempt, 5)))

const describe = (error: unknown) => error instanceof Error ? error.message : String(error)

/**
 * Closes a consumer: leaving the group if the broker answers soon, dropping it otherwise. A close can
 * hang for good on a broker that went away (seen on restarts), so neither step is waited for long.
 */
const close = (consumer: AnyConsumer) =>
  Effect.promise(() => consumer.close()).pipe(
    Effect.timeout("3 seconds"),
    Effect.catchCause(() => Effect.promise(() => consumer.close(true)).pipe(Effect.timeout("1 second"))),
    Effect.ignore
  )

/** Closes a member's stream; a broker that does not answer must not hold the rejoin up. */
export const closeStream = (stream: { readonly close: () => Promise<void> }): Effect.Effect<void> =>
  Effect.promise(() => stream.close()).pipe(Effect.timeout("3 seconds"), Effect.ignore)

interface Joined<C extends AnyConsumer> {
  readonly consumer: C
  readonly stream: StreamOf<C>
  readonly scope: Scope.Closeable
  /** Completes with the reason when the member's heartbeats stall. */
  readonly stalled: Deferred.Deferred<string>
}

/** Joins with a first member (failing if it cannot), then keeps a member in the group until `stop`. */
export const make = <C extends AnyConsumer>(options: MemberOptions<C>): Effect.Effect<Member<C>, BusError, Scope.Scope> =>
  Effect.gen(function*() {
    let current: Joined<C> | undefined

    const join: Effect.Effect<Joined<C>, BusError> = Effect.gen(function*() {
      const scope = yield* Scope.make()
      return yield* Effect.gen(function*() {
        const consumer = yield* Effect.acquireRelease(Effect.sync(options.create), close)
        const stalled = yield* Deferred.make<string>()
        consumer.on("consumer:heartbeat:stalled", (payload: { readonly lastError?: unknown }) => {
          Deferred.doneUnsafe(stalled, Exit.succeed(`heartbeats stalled: ${describe(payload.lastError ?? "no answer")}`))
        })
        const stream = yield* Effect.tryPromise({
          try: () => options.open(consumer),
          catch: (cause) => new BusError({ message: `could not join: ${describe(cause)}`, cause })
        }).pipe(
          Effect.timeoutOrElse({
            duration: options.joinTimeout,
            orElse: () => Effect.fail(new BusError({ message: `could not join within ${Duration.format(options.joinTimeout)}` }))
          })
        )
        const joined: Joined<C> = { consumer, stream, scope, stalled }
        current = joined
        yield* options.joined(consumer, stream)
        return joined
      }).pipe(
        Scope.provide(scope),
        Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause)))
      )
    })

    /** Runs a member until it is lost; then it owns nothing and is closed. */
    const serve = (member: Joined<C>) =>
      Effect.gen(function*() {
        const reason = yield* Effect.raceFirst(options.run(member.consumer, member.stream), Deferred.await(member.stalled))
        yield* Effect.logWarning(`${options.name}: lost the group membership; joining again`, {
          reason,
          generation: member.consumer.generationId
        })
        current = undefined
        yield* options.lost(reason)
        // In the background: the next member does not wait for the old one's goodbye.
        yield* Effect.forkDetach(Scope.close(member.scope, Exit.void))
      })

    /** Joins again, for as long as it takes. */
    const rejoin = Effect.gen(function*() {
      for (let attempt = 0;; attempt++) {
        yield* Effect.raceFirst(Effect.sleep(rejoinBackoff(attempt)), options.recovered)
        const result = yield* Effect.result(join)
        if (result._tag === "Success") {
          yield* Effect.logInfo(`${options.name}: joined the group again`, {
            attempt: attempt + 1,
            generation: result.success.consumer.generationId
          })
          return result.success
        }
        yield* options.lost(result.failure.message)
        // Every attempt at first, then every 10th: a long outage must not flood the log.
        if (attempt < 10 || attempt % 10 === 0) {
          yield* Effect.logWarning(`${options.name}: could not join the group; trying again`, {
            attempt: attempt + 1,
            error: result.failure.message,
            next_in: Duration.format(rejoinBackoff(attempt + 1))
          })
        }
      }
    })

    const first = yield* join
    const loop = yield* Effect.forkDetach(
      serve(first).pipe(Effect.andThen(Effect.forever(Effect.flatMap(rejoin, serve))))
    )
    const stop = Effect.gen(function*() {
      yield* Fiber.interrupt(loop)
      const last = current
      current = undefined
      if (last !== undefined) yield* Scope.close(last.scope, Exit.void)
    })
    yield* Effect.addFinalizer(() => stop)
    return { current: () => current?.consumer, stop }
  })
