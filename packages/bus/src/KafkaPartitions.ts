/**
 * `Bus.consume` on Kafka: one consumer group member that routes its records
 * to one worker per owned partition.
 *
 * Choices:
 * - Classic group protocol with the cooperative-sticky assignor: a
 *   rebalance moves only the partitions that change owner, the others keep
 *   running. No static membership (`group.instance.id`): a stopped node leaves
 *   at once instead of holding its partitions for a session timeout.
 * - The session timeout bounds failover after a crash (the broker notices the
 *   dead member only then); the caller picks it (a few seconds in tests).
 * - No autocommit; offsets are committed in the background after the
 *   database transaction (see `Committer`), and on revoke. The stream restarts
 *   from the committed offset at every rebalance; records already routed are
 *   recognised by offset and dropped.
 * - Membership is kept by `KafkaMember`: a member whose stream ends or whose
 *   heartbeats stall is replaced by a new consumer, tried again with a capped
 *   backoff forever. Meanwhile this node owns nothing: its workers stop, the
 *   group status says it is not a member (health: not ready), and the other
 *   members' new generation claims its partitions.
 * - A worker sees each offset once, in order: it starts from the group's
 *   committed offset (or the log start) and takes only the next expected
 *   offset, so records fetched before a rebalance that arrive late are dropped.
 *   A record past the expected offset is taken only once the group's committed
 *   offset shows that everything before it was processed (the previous owner's
 *   last commits may land after this worker started).
 */
import { Consumer, type Message, MessagesStream, MessagesStreamFallbackModes, MessagesStreamModes } from "@platformatic/kafka"
import { COOPERATIVE_STICKY_ASSIGNOR, ListOffsetTimestamps, stringDeserializers } from "@platformatic/kafka"
import { Clock, Duration, Effect, Queue, Schedule, Semaphore, Stream } from "effect"
import type { Cause, Option, Scope } from "effect"
import { type BusRecord, BusError, type PartitionClaim } from "./Bus.ts"
import type * as BusStatus from "./BusStatus.ts"
import * as Committer from "./Committer.ts"
import * as KafkaMember from "./KafkaMember.ts"
import * as PartitionLag from "./PartitionLag.ts"
import * as PartitionWorkers from "./PartitionWorkers.ts"

export interface GroupOptions {
  readonly bootstrap: ReadonlyArray<string>
  /** Prepended to topic and group names on the broker (see `KafkaBusOptions.prefix`). */
  readonly prefix: string
  readonly clientId: string
  readonly sessionTimeout: Duration.Duration
  readonly heartbeatInterval: Duration.Duration
  readonly rebalanceTimeout: Duration.Duration
  readonly commitInterval: Duration.Duration
  /** On a graceful stop, how long the workers may take to finish the record in hand. Default 5 seconds. */
  readonly drainTimeout?: Duration.Duration | undefined
}

type StringMessage = Message<string, string, string, string>
type GroupConsumer = Consumer<string, string, string, string>
type GroupStream = MessagesStream<string, string, string, string>

/** A received message as a bus record of `topic`; values that are not JSON stay text. */
export const toRecord = (topic: string, message: StringMessage): BusRecord => {
  let value: unknown = message.value
  try {
    value = JSON.parse(message.value)
  } catch {
    // not JSON: the consumer gets the text
  }
  return {
    topic,
    partition: message.partition,
    offset: message.offset,
    key: message.key ?? "",
    value,
    headers: Object.fromEntries(message.headers)
  }
}

export const kafkaError = (message: string) => (cause: unknown) => new BusError({ message, cause })

/**
 * Makes a stream fetch again from the group's committed offsets, as it does
 * after a rebalance. `@platformatic/kafka` 2.12 keeps this method behind a
 * symbol it does not export; without it the partition waits for the next
 * rebalance.
 */
const refreshOffsetsAndFetch = Object.getOwnPropertySymbols(MessagesStream.prototype).find((symbol) =>
  symbol.description === "plt.kafka.messagesStream.refreshOffsetsAndFetch"
)

/** Whether `rewind` works with the installed `@platformatic/kafka`. */
export const canRewind = refreshOffsetsAndFetch !== undefined

const rewind = (stream: MessagesStream<string, string, string, string>) => {
  const method = refreshOffsetsAndFetch === undefined
    ? undefined
    : (stream as unknown as Record<symbol, unknown>)[refreshOffsetsAndFetch]
  if (typeof method === "function") method.call(stream)
}

/**
 * Stops a feed: the records not taken yet are left to the partition's next owner (it starts from the
 * committed offset), and the reader's stream ends once it is done with what it holds. (Handing records
 * out one at a time instead, to stop between any two, slowed the recovery after a broker restart.)
 */
export const stopFeed = <A>(queue: Queue.Queue<A, Cause.Done>): Effect.Effect<void> =>
  Queue.clear(queue).pipe(Effect.andThen(Queue.end(queue)), Effect.asVoid)

/**
 * A new worker's start offset, read until Kafka answers, but only while the partition is still this node's
 * and the node is not stopping; then `None`. It runs inside a reconcile, which holds the reconciler's permit:
 * waiting on once the membership was lost held up the lost member's reconcile, and its replacement, for good.
 */
export const awaitStartOffset = <E>(read: Effect.Effect<bigint, E>, owned: () => boolean, stopping: () => boolean): Effect.Effect<Option.Option<bigint>> => {
  const wanted = () => owned() && !stopping()
  return read.pipe(
    // A consumer closed by the stop or replaced fails this at once: nothing to warn about then.
    Effect.tapError((error) => wanted() ? Effect.logWarning("retrying", error) : Effect.void),
    Effect.retry({ schedule: Schedule.min([Schedule.exponential("100 millis"), Schedule.spaced("5 seconds")]), while: wanted }),
    Effect.option
  )
}

/** Records routed to one worker, from the offset it expects next. */
interface Feed {
  readonly queue: Queue.Queue<StringMessage, Cause.Done>
  next: bigint
  /** When the committed offset was last read because a record came past `next`. */
  checkedAt: number
}

/** How often a feed that sees records past its expected offset re-reads the committed offset. */
const RECHECK_MS = 1000

/** How many records may wait for a partition's worker before the fetch loop waits. */
const FEED_CAPACITY = 1024

/** How long a change of assignment waits for the revoked partitions' offset commits. */
const LOST_COMMIT_WAIT = Duration.seconds(1)

/** How long a graceful stop lets the workers finish the record in hand, unless the caller says otherwise. */
const DRAIN_TIMEOUT = Duration.seconds(5)

export const consume = <R>(
  options: GroupOptions,
  group: string,
  topic: string,
  onPartition: (claim: PartitionClaim) => Effect.Effect<void, never, R>,
  status: BusStatus.Tracker
): Effect.Effect<void, BusError, Scope.Scope | R> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<R>()
    const physical = options.prefix + topic
    const membership = status.group(group, topic)
    yield* Effect.addFinalizer(() => Effect.sync(membership.remove))

    /** The member in the group now (replaced when it is lost; see `KafkaMember`). */
    let consumer: GroupConsumer | undefined
    /** This node's partitions as the member's latest generation says; none while it is not a member. */
    const ownedNow = (): ReadonlyArray<number> =>
      consumer?.assignments?.find((assignment) => assignment.topic === physical)?.partitions ?? []
    const withConsumer = <A>(what: string, use: (consumer: GroupConsumer) => Promise<A>) =>
      Effect.suspend(() => {
        const member = consumer
        return member === undefined
          ? Effect.fail(new BusError({ message: `${what}: not a member of ${group} right now` }))
          : Effect.tryPromise({ try: () => use(member), catch: kafkaError(what) })
      })

    const committer = yield* Committer.make<number>(
      (marks) =>
        withConsumer("offset commit", (member) =>
          member.commit({
            offsets: marks.map((mark) => ({
              topic: physical,
              partition: mark.partition,
              offset: mark.next,
              leaderEpoch: mark.meta
            }))
          })).pipe(
            // Lost commits only mean redeliveries, which the inbox absorbs.
            Effect.catch((error) => Effect.logDebug("offset commit failed", error))
          ),
      options.commitInterval
    )

    const lastEpoch = new Map<number, number>()

    /** Where a new worker starts: the group's committed offset, or the log start. */
    const startOffset = (partition: number) =>
      withConsumer(`could not read the committed offset of ${topic}/${partition}`, async (member) => {
        const [committed, earliest] = await Promise.all([
          member.listCommittedOffsets({ topics: [{ topic: physical, partitions: [partition] }] }),
          member.listOffsets({
            topics: [physical],
            partitions: { [physical]: [partition] },
            timestamp: ListOffsetTimestamps.EARLIEST
          })
        ])
        const from = committed.get(physical)?.[partition] ?? -1n
        const start = earliest.get(physical)?.[partition] ?? 0n
        return from > start ? from : start
      })

    const feeds = new Map<number, Feed>()
    // Lag, when a scrape asks: the partitions' end offsets from the broker against the workers' progress.
    const lag = PartitionLag.make(group, topic, (partitions) =>
      withConsumer("reading the end offsets", (member) =>
        member.listOffsets({ topics: [physical], partitions: { [physical]: [...partitions] }, timestamp: ListOffsetTimestamps.LATEST })
      ).pipe(
        Effect.map((offsets) => {
          const ends = offsets.get(physical) ?? []
          return new Map(partitions.flatMap((partition) => ends[partition] === undefined ? [] : [[partition, ends[partition]!] as const]))
        }),
        Effect.orElseSucceed(() => new Map<number, bigint>())
      ))
    yield* status.lag.add(lag)
    /** A graceful stop began: the workers take no more records. */
    let stopping = false

    const workers = yield* PartitionWorkers.make((partition, generation) =>
      Effect.gen(function*() {
        const start = yield* awaitStartOffset(startOffset(partition), () => ownedNow().includes(partition), () => stopping)
        // A worker prepared while the stop began takes nothing: its records are the next owner's.
        if (stopping || start._tag === "None") return Effect.void
        const queue = yield* Queue.bounded<StringMessage, Cause.Done>(FEED_CAPACITY)
        const feed: Feed = { queue, next: start.value, checkedAt: 0 }
        feeds.set(partition, feed)
        // The stop may have ended the feeds between the check above and here (no yield from the set on).
        if (stopping) Queue.endUnsafe(queue)
        lag.started(partition, start.value)
        const claim: PartitionClaim = {
          topic,
          partition,
          generation,
          records: Stream.fromQueue(queue).pipe(Stream.map((message) => toRecord(topic, message))),
          commit: (offset) =>
            Effect.sync(() => {
              const leaderEpoch = lastEpoch.get(partition) ?? -1
              committer.mark(partition, offset + 1n, leaderEpoch)
              lag.processed(partition, offset + 1n)
            }),
          owned: Effect.sync(() => ownedNow().includes(partition))
        }
        return onPartition(claim).pipe(
          Effect.provideContext(context),
          Effect.ensuring(Effect.suspend(() => {
            if (feeds.get(partition) === feed) {
              feeds.delete(partition)
              lag.stopped(partition)
            }
            return Queue.shutdown(queue)
          })),
          Effect.annotateLogs({ group, topic, partition })
        )
      }).pipe(Effect.annotateLogs({ group, topic, partition }))
    )

    // Brings the workers in line with the member's assignment, once per change (the consumer
    // replaces its assignments array whenever they change). `synced` moves only once the
    // workers are in place, so a record is never routed while its partition's worker starts.
    const reconciling = yield* Semaphore.make(1)
    let synced: { readonly member: unknown; readonly generation: number; readonly assignments: unknown } | undefined
    const isSynced = () =>
      synced !== undefined && synced.member === consumer && synced.generation === (consumer?.generationId ?? -1) &&
      synced.assignments === consumer?.assignments
    const reconcile = Effect.suspend(() =>
      isSynced() ? Effect.void : reconciling.withPermit(Effect.suspend(() => {
        if (isSynced()) return Effect.void
        const target = { member: consumer, generation: consumer?.generationId ?? -1, assignments: consumer?.assignments }
        const owned = ownedNow()
        const lost = workers.running().filter((partition) => !owned.includes(partition))
        return workers.sync(owned, target.generation).pipe(
          // The revoked partitions' last commits, briefly: a commit during a rebalance can wait on the
          // coordinator, and the next owner's inbox absorbs what an uncommitted offset redelivers.
          Effect.andThen(committer.flush(lost).pipe(Effect.timeoutOption(LOST_COMMIT_WAIT))),
          Effect.andThen(Effect.sync(() => {
            synced = target
            if (target.member !== undefined) membership.joined(target.generation, owned)
          })),
          Effect.andThen(Effect.logInfo("assignment", { group, topic, generation: target.generation, partitions: owned.join(",") }))
        )
      }))
    )

    /**
     * A record past the expected offset: skip ahead to the committed offset if
     * the group has moved on. If it has not, the stream is ahead of what this
     * worker has seen (a fetch from before a rebalance landed after the stream
     * went back to the committed offsets): send the stream back to them again.
     */
    const catchUp = (stream: GroupStream, feed: Feed, partition: number, offset: bigint) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (now - feed.checkedAt < RECHECK_MS) return
        feed.checkedAt = now
        const committed = yield* withConsumer("listing committed offsets", (member) =>
          member.listCommittedOffsets({ topics: [{ topic: physical, partitions: [partition] }] })
        ).pipe(
          Effect.map((offsets) => offsets.get(physical)?.[partition] ?? -1n),
          Effect.retry({ times: 5, schedule: Schedule.spaced("200 millis") }),
          Effect.orElseSucceed(() => -1n)
        )
        if (committed > feed.next) feed.next = committed
        if (offset > feed.next) rewind(stream)
      })

    const route = (stream: GroupStream) => (message: StringMessage) =>
      Effect.gen(function*() {
        yield* reconcile
        const feed = feeds.get(message.partition)
        if (feed === undefined || stopping) return
        if (message.offset > feed.next) yield* catchUp(stream, feed, message.partition, message.offset)
        if (message.offset !== feed.next) return
        feed.next = message.offset + 1n
        lastEpoch.set(message.partition, message.leaderEpoch)
        yield* Queue.offer(feed.queue, message)
      })

    // Rebalance events only signal; the reconciler fiber does the work.
    const changed = yield* Queue.dropping<void>(1)
    const signal = () => Queue.offerUnsafe(changed, undefined)
    yield* Effect.forkScoped(Queue.take(changed).pipe(Effect.andThen(reconcile), Effect.forever))

    const member = yield* KafkaMember.make<GroupConsumer>({
      name: `${group} on ${topic}`,
      create: () => {
        const created: GroupConsumer = new Consumer<string, string, string, string>({
          groupId: options.prefix + group,
          clientId: options.clientId,
          bootstrapBrokers: [...options.bootstrap],
          autocommit: false,
          sessionTimeout: Duration.toMillis(options.sessionTimeout),
          heartbeatInterval: Duration.toMillis(options.heartbeatInterval),
          rebalanceTimeout: Duration.toMillis(options.rebalanceTimeout),
          // Heartbeats failing for a session timeout: the broker has dropped this member by now.
          heartbeatStallTimeout: Duration.toMillis(options.sessionTimeout),
          protocols: [{ name: COOPERATIVE_STICKY_ASSIGNOR, version: 3 }],
          deserializers: stringDeserializers,
          maxWaitTime: 500,
          ...KafkaMember.clientTimeouts
        })
        created.on("consumer:group:join", signal)
        created.on("consumer:group:rebalance", signal)
        return created
      },
      open: (created) =>
        created.consume({
          topics: [physical],
          mode: MessagesStreamModes.COMMITTED,
          fallbackMode: MessagesStreamFallbackModes.EARLIEST,
          autocommit: false
        }),
      joinTimeout: KafkaMember.joinTimeout(options),
      joined: (created) =>
        Effect.gen(function*() {
          consumer = created
          yield* reconcile
        }),
      run: (_, stream) =>
        Stream.fromAsyncIterable(stream, kafkaError("the consumer stream failed")).pipe(
          Stream.runForEach(route(stream)),
          Effect.as("the consumer stream ended"),
          Effect.catch((error) => Effect.succeed(`the consumer stream failed: ${error.message}`)),
          Effect.ensuring(KafkaMember.closeStream(stream))
        ),
      broker: status,
      // The group is shared by the nodes: a new member takes the lost one's place without a session timeout's wait.
      keepMemberId: true,
      // Not a member: it owns nothing. Its partitions go to the other members, which claim them.
      lost: (reason) =>
        Effect.gen(function*() {
          consumer = undefined
          membership.left(reason)
          yield* reconcile
        })
    })

    // Graceful stop: the workers take no more records and finish the one in hand (up to the deadline; a
    // command cut short is rolled back and redone by the next owner), then their last commits, then the
    // consumer leaves the group (LeaveGroup), so the others take its partitions at once, not after a session timeout.
    // Each line names the group, the topic and the partitions.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        stopping = true
        yield* Effect.forEach(feeds.values(), (feed) => stopFeed(feed.queue), { discard: true })
        // Mostly the workers holding a record: the idle ones end as soon as their feeds do.
        const running = workers.running()
        const deadline = options.drainTimeout ?? DRAIN_TIMEOUT
        const began = yield* Clock.currentTimeMillis
        const named = { group, topic, partitions: running.join(",") }
        yield* Effect.logInfo("draining: the busy workers finish the records in hand", { ...named, deadline: Duration.format(deadline) })
        const cut = yield* workers.finish(running, deadline)
        if (cut.length > 0) {
          yield* Effect.logWarning("the drain deadline passed: stopped the workers still running", { group, topic, partitions: cut.join(",") })
        }
        yield* committer.flush()
        yield* member.stop
        const ms = (yield* Clock.currentTimeMillis) - began
        yield* Effect.logInfo("drained: offsets committed, the member closed (it leaves the group)", { ...named, ms })
      })
    )
  })
