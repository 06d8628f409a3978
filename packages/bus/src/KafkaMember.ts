/**
 * One consumer-group membership on Kafka that is kept, whatever happens to
 * the broker: a member whose stream ends or whose heartbeats stall (it is no
 * longer in the group, whether it knows it or not) is closed, and a new
 * consumer joins in its place, tried again with a capped backoff for as long
 * as it takes. A `Consumer` of `@platformatic/kafka` whose rejoin failed once
 * stays out of the group for good (it schedules no more heartbeats), so a
 * fresh one is the only sure way back.
 *
 * After a broker restart the waits are short: a join that failed while the
 * broker answers (its group coordinator still loading) is tried again after
 * 0.5 s, and with `keepMemberId` the new consumer joins under the lost one's
 * member id, so the coordinator, which reloaded the group with the old members,
 * need not wait a session timeout for the old member to expire.
 */
import type { Consumer, MessagesStream } from "@platformatic/kafka"
import { Deferred, Duration, Effect, Exit, Fiber, Schedule, Scope } from "effect"
import { BusError } from "./Bus.ts"
import type { Tracker } from "./BusStatus.ts"

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
  /**
   * The broker's reachability: `recovered` completes when it answers again after an outage (the next
   * attempt goes at once); while it is `up`, a failed join is tried again after `REJOIN_WHILE_UP`.
   */
  readonly broker: Pick<Tracker, "recovered" | "up">
  /** Join under the lost member's id (a group shared with other nodes; not for a group of one's own). */
  readonly keepMemberId?: boolean | undefined
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
 * The produce acknowledgement timeout (`timeout`, which the client also gives the broker for InitProducerId)
 * and the pause between the client's retries. The client's defaults (5 s, retried 3 times 1 s apart) held a
 * send on a connection the broker's restart had cut for up to 24 s. `timeout` does not bound a request the
 * broker never answers: that is the connection's `requestTimeout` (30 s by default), left so because a
 * JoinGroup may rightly wait for the other members up to the rebalance timeout. Our own limits (joins,
 * sends, probes) bound the waits instead.
 */
export const clientTimeouts = { timeout: 3000, retryDelay: 250 } as const

/** The wait before rejoin attempt `attempt` (0-based) while the broker does not answer: 0.5 s doubling, at most 10 s. */
export const rejoinBackoff = (attempt: number): Duration.Duration =>
  Duration.millis(Math.min(10_000, 500 * 2 ** Math.min(attempt, 5)))

/**
 * The wait before the next attempt while the broker answers: a join that fails then failed on the group
 * (a coordinator still loading after a restart), which clears up in moments, not on the network.
 */
export const REJOIN_WHILE_UP = Duration.millis(500)

/** How long a rejoin waits for the lost member's close before it takes over that member's id. */
const TAKEOVER_WAIT = Duration.seconds(1)

/** The broker's error codes anywhere in a client error (its nested `errors`), e.g. `COORDINATOR_LOAD_IN_PROGRESS`. */
const codesOf = (error: unknown, found = new Set<string>()): Set<string> => {
  if (typeof error !== "object" || error === null) return found
  const { apiId, errors } = error as { readonly apiId?: unknown; readonly errors?: unknown }
  if (typeof apiId === "string") found.add(apiId)
  if (Array.isArray(errors)) for (const inner of errors) codesOf(inner, found)
  return found
}

/**
 * What the group coordinator answers while members come and go (a rolling restart: the node stopping
 * next leaves while this one joins) or while it moves: passes in moments. `@platformatic/kafka` retries
 * such a join only 4 times, 250 ms apart.
 */
const GROUP_IN_MOTION = new Set(["REBALANCE_IN_PROGRESS", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"])

/** Whether a failed join met a group in motion (worth trying again soon), not a broker that cannot be reached. */
export const groupInMotion = (error: unknown): boolean => [...codesOf(error)].some((code) => GROUP_IN_MOTION.has(code))

/** How often a node's first join is tried, `REJOIN_WHILE_UP` apart, while it meets a group in motion. */
const FIRST_JOIN_ATTEMPTS = 20

const describe = (error: unknown) => {
  const message = error instanceof Error ? error.message : String(error)
  const codes = [...codesOf(error)]
  return codes.length === 0 ? message : `${message} [${codes.join(", ")}]`
}

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
  /** Completes with the reason when the member's heartbeats stall or its own rejoin fails. */
  readonly stalled: Deferred.Deferred<string>
}

/** Joins with a first member (failing if it cannot), then keeps a member in the group until `stop`. */
export const make = <C extends AnyConsumer>(options: MemberOptions<C>): Effect.Effect<Member<C>, BusError, Scope.Scope> =>
  Effect.gen(function*() {
    let current: Joined<C> | undefined
    /** The lost member's id, once its close is done (so its goodbye cannot remove the member that takes it over). */
    let takeOver: { readonly memberId: string; readonly closed: Fiber.Fiber<void> } | undefined

    const join: Effect.Effect<Joined<C>, BusError> = Effect.gen(function*() {
      const scope = yield* Scope.make()
      return yield* Effect.gen(function*() {
        const previous = takeOver
        const closedInTime = previous === undefined ? false : yield* Fiber.await(previous.closed).pipe(
          Effect.timeoutOption(TAKEOVER_WAIT),
          Effect.map((done) => done._tag === "Some")
        )
        const consumer = yield* Effect.acquireRelease(
          Effect.sync(options.create),
          (consumer, exit) => {
            // A join that failed leaves no member behind: no goodbye under an id a later attempt takes over.
            if (Exit.isFailure(exit) && previous !== undefined) consumer.memberId = null
            return close(consumer)
          }
        )
        // An id the group no longer knows is refused (UNKNOWN_MEMBER_ID) and the consumer joins afresh.
        if (previous !== undefined && closedInTime) consumer.memberId = previous.memberId
        const stalled = yield* Deferred.make<string>()
        consumer.on("consumer:heartbeat:stalled", (payload: { readonly lastError?: unknown }) => {
          Deferred.doneUnsafe(stalled, Exit.succeed(`heartbeats stalled: ${describe(payload.lastError ?? "no answer")}`))
        })
        // The consumer emits "error" when its own rejoin failed (it then stays out of the group); with no
        // listener, that emit would throw out of a socket callback and end the process.
        consumer.on("error", (error: unknown) => {
          Deferred.doneUnsafe(stalled, Exit.succeed(`the consumer's rejoin failed: ${describe(error)}`))
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
        takeOver = undefined
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
        const memberId = member.consumer.memberId
        // In the background: the next member does not wait long for the old one's goodbye.
        const closed = yield* Effect.forkDetach(Scope.close(member.scope, Exit.void))
        if (options.keepMemberId === true && memberId !== null && memberId !== "") takeOver = { memberId, closed }
      })

    /** The wait before attempt `attempt`: short while the broker answers, a growing backoff while it does not. */
    const pause = (attempt: number) => options.broker.up() ? Duration.min(REJOIN_WHILE_UP, rejoinBackoff(attempt)) : rejoinBackoff(attempt)

    /** Joins again, for as long as it takes. */
    const rejoin = Effect.gen(function*() {
      for (let attempt = 0;; attempt++) {
        yield* Effect.raceFirst(Effect.sleep(pause(attempt)), options.broker.recovered)
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
            next_in: Duration.format(pause(attempt + 1))
          })
        }
      }
    })

    // The first join fails the node's start, but not for a group that is only in motion (the readiness of a
    // node does not wait for every group it joins, so a rolling restart may stop the next node meanwhile).
    const first = yield* join.pipe(
      Effect.tapError((error) =>
        groupInMotion(error.cause) ? Effect.logWarning(`${options.name}: the group is rebalancing; joining again`, { error: error.message }) : Effect.void
      ),
      Effect.retry({ times: FIRST_JOIN_ATTEMPTS - 1, schedule: Schedule.spaced(REJOIN_WHILE_UP), while: (error) => groupInMotion(error.cause) })
    )
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
