/**
 * Publishes committed outbox rows and marks them published. Each node relays
 * the rows of the command partitions it owns, oldest first, so events keep
 * the order of the commands that wrote them. Delivery is at least once (a
 * crash between publish and mark publishes again; a stale owner may too):
 * consumers deduplicate by the event's `id`, and since every publisher goes in
 * id order, first occurrences stay in order.
 *
 * The rows a command's transaction wrote come back from that transaction (`committed`): they are published
 * from memory, without reading them again, once the relay knows nothing older of their partition is still
 * unpublished (it read the partition since it began to own it, and no publish failed since). Their marks
 * are written in batches, a little later: a mark lost in a crash only publishes them again. Anything else
 * (rows left behind by a crash, a failed publish, a transaction whose rows did not come back) is read from
 * the table: at once for a partition just owned or after a failure, else at the next poll.
 */
import { Cause, Clock, Duration, Effect, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { Bus } from "./Bus.ts"

/** One unpublished `event_outbox` row, as the relay publishes it. */
export interface RelayedRow {
  /** The table's id (a bigint, as text): the order of a partition's rows. */
  readonly id: string
  readonly eventId: string
  readonly topic: string
  readonly key: string
  readonly payload: { readonly type: string; readonly v: number }
}

export interface OutboxRelay {
  /** Start or stop relaying the rows of a command partition. */
  readonly own: (partition: number) => void
  readonly disown: (partition: number) => void
  /** A command may have left rows behind: read the table now rather than at the next poll. */
  readonly wake: () => void
  /** A command's transaction committed these rows of `partition` (in id order): publish them without reading them. */
  readonly committed: (partition: number, rows: ReadonlyArray<RelayedRow>) => void
}

export interface OutboxRelayOptions {
  readonly batchSize?: number | undefined
  /** Also read the table this often, for rows left behind by a crash or a failed publish. */
  readonly pollInterval?: Duration.Input | undefined
  /** Rows published from memory are marked at most this late (or once a batch of them is waiting). */
  readonly markDelay?: Duration.Input | undefined
}

export const make = Effect.fnUntraced(function*(options: OutboxRelayOptions = {}) {
  const bus = yield* Bus
  const sql = yield* SqlClient.SqlClient
  const batchSize = options.batchSize ?? 500
  const pollMillis = Duration.toMillis(Duration.fromInputUnsafe(options.pollInterval ?? Duration.seconds(1)))
  const markMillis = Duration.toMillis(Duration.fromInputUnsafe(options.markDelay ?? Duration.millis(200)))
  const owned = new Set<number>()
  /** Owned partitions whose table must be read before their rows can go from memory. */
  const unread = new Set<number>()
  /** Committed rows not yet published, in commit order (each partition's in id order). */
  let handed: Array<{ readonly partition: number; readonly row: RelayedRow }> = []
  /** Rows published from memory, not yet marked, and when the oldest of them was published. */
  let unmarked: Array<string> = []
  let unmarkedSince = 0
  let lastRead = Number.NEGATIVE_INFINITY
  const signal = yield* Queue.dropping<void>(1)

  const publish = (rows: ReadonlyArray<RelayedRow>) =>
    bus.publish(rows.map((row) => ({
      topic: row.topic,
      key: row.key,
      value: row.payload,
      headers: { "event-id": row.eventId }
    })))

  const mark = (ids: ReadonlyArray<string>) => sql`UPDATE event_outbox SET published_at = now() WHERE id IN ${sql.in(ids)}`

  /** Marks what went from memory (before a read of the table, which would otherwise find it again). */
  const flushMarks = Effect.suspend(() => {
    if (unmarked.length === 0) return Effect.void
    const ids = unmarked
    unmarked = []
    // Lost, they are only published again by a later read: at least once either way.
    return mark(ids).pipe(Effect.asVoid)
  })

  /** Reads and publishes one batch of the owned partitions' unpublished rows; returns whether more may wait. */
  const relayTable = Effect.gen(function*() {
    yield* flushMarks
    lastRead = yield* Clock.currentTimeMillis
    const reading = [...owned]
    for (const partition of reading) unread.delete(partition)
    if (reading.length === 0) return false
    // Ordered by the column: the text alias `id` would relay event 10 before event 9.
    const rows = yield* sql<RelayedRow>`
      SELECT id::text AS id, event_id::text AS "eventId", topic, key, payload FROM event_outbox
      WHERE published_at IS NULL AND partition IN ${sql.in(reading)}
      ORDER BY event_outbox.id LIMIT ${batchSize}`.pipe(
        Effect.tapCause(() => Effect.sync(() => reading.forEach((partition) => owned.has(partition) && unread.add(partition))))
      )
    if (rows.length === 0) return false
    // Committed rows handed over meanwhile were read here (a partition's commands run one at a time).
    const read = new Set(rows.map((row) => row.id))
    handed = handed.filter(({ row }) => !read.has(row.id))
    const more = rows.length === batchSize
    if (more) for (const partition of reading) if (owned.has(partition)) unread.add(partition)
    yield* publish(rows).pipe(
      Effect.tapCause(() => Effect.sync(() => reading.forEach((partition) => owned.has(partition) && unread.add(partition))))
    )
    yield* mark(rows.map((row) => row.id))
    return more
  })

  /** Publishes the rows handed over, from memory; returns whether more wait. */
  const relayHanded = Effect.gen(function*() {
    const batch = handed.slice(0, batchSize)
    handed = handed.slice(batch.length)
    yield* publish(batch.map(({ row }) => row)).pipe(
      Effect.tapCause(() =>
        Effect.sync(() => {
          // Still unpublished in the table: read from there, in order, with whatever came after them.
          for (const partition of owned) unread.add(partition)
          handed = []
        })
      )
    )
    if (unmarked.length === 0) unmarkedSince = yield* Clock.currentTimeMillis
    for (const { row } of batch) unmarked.push(row.id)
    if (unmarked.length >= batchSize) yield* flushMarks
    return handed.length > 0
  })

  const step = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (unread.size > 0 || now - lastRead >= pollMillis) return yield* relayTable
    if (handed.length > 0) return yield* relayHanded
    if (unmarked.length > 0 && now - unmarkedSince >= markMillis) yield* flushMarks
    return false
  })

  /** How long to wait for a signal before the next poll or the marks are due. */
  const idle = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const poll = lastRead + pollMillis - now
    const wait = unmarked.length > 0 ? Math.min(poll, unmarkedSince + markMillis - now) : poll
    if (wait > 0) yield* Queue.take(signal).pipe(Effect.timeoutOption(Duration.millis(wait)))
  })

  const loop = Effect.gen(function*() {
    // Whatever fails (a lost database surfaces as a defect too), the relay keeps going.
    const more = yield* step.pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logWarning("outbox relay failed; retrying", { error: String(Cause.squash(cause)) }).pipe(Effect.as(false))
      )
    )
    if (!more) yield* idle
  }).pipe(Effect.forever)

  yield* Effect.forkScoped(loop)
  const context = yield* Effect.context<never>()
  // Published rows are marked before the node lets go (else the next owner publishes them again).
  yield* Effect.addFinalizer(() => flushMarks.pipe(Effect.ignore))

  return {
    own: (partition) => {
      owned.add(partition)
      unread.add(partition)
      Queue.offerUnsafe(signal, undefined)
    },
    disown: (partition) => {
      owned.delete(partition)
      unread.delete(partition)
      // Its next owner reads them from the table.
      handed = handed.filter((entry) => entry.partition !== partition)
      // And should not find what went from memory unmarked (it would publish it again): marked now, not in
      // up to `markDelay` (all partitions' marks; a failure only leaves them to be published again).
      Effect.runForkWith(context)(flushMarks.pipe(Effect.ignore))
    },
    wake: () => {
      lastRead = Number.NEGATIVE_INFINITY
      Queue.offerUnsafe(signal, undefined)
    },
    committed: (partition, rows) => {
      if (!owned.has(partition) || rows.length === 0) return
      for (const row of rows) handed.push({ partition, row })
      Queue.offerUnsafe(signal, undefined)
    }
  } satisfies OutboxRelay as OutboxRelay
})

/** Forgets events published more than `age` ago. */
export const prune = Effect.fnUntraced(function*(age: Duration.Input) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM event_outbox
    WHERE published_at IS NOT NULL AND published_at < now() - ${Duration.toMillis(age)} * interval '1 millisecond'`
})
