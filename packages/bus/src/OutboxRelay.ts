/**
 * Publishes committed outbox rows and marks them published. Each node relays
 * the rows of the command partitions it owns, oldest first, so events keep
 * the order of the commands that wrote them. Delivery is at least once (a
 * crash between publish and mark publishes again; a stale owner may too):
 * consumers deduplicate by the event's `id`, and since every publisher goes in
 * id order, first occurrences stay in order.
 */
import { Cause, Duration, Effect, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { Bus } from "./Bus.ts"

export interface OutboxRelay {
  /** Start or stop relaying the rows of a command partition. */
  readonly own: (partition: number) => void
  readonly disown: (partition: number) => void
  /** A command just appended events: relay now rather than at the next poll. */
  readonly wake: () => void
}

export interface OutboxRelayOptions {
  readonly batchSize?: number | undefined
  /** Also relay this often, for rows left behind by a crash or a failed publish. */
  readonly pollInterval?: Duration.Input | undefined
}

interface Row {
  readonly id: string
  readonly eventId: string
  readonly topic: string
  readonly key: string
  readonly payload: { readonly type: string; readonly v: number }
}

export const make = Effect.fnUntraced(function*(options: OutboxRelayOptions = {}) {
  const bus = yield* Bus
  const sql = yield* SqlClient.SqlClient
  const batchSize = options.batchSize ?? 500
  const pollInterval = options.pollInterval ?? Duration.seconds(1)
  const owned = new Set<number>()
  const signal = yield* Queue.dropping<void>(1)

  /** Publishes one batch; returns how many rows it published. */
  const relayBatch = Effect.gen(function*() {
    if (owned.size === 0) return 0
    // Ordered by the column: the text alias `id` would relay event 10 before event 9.
    const rows = yield* sql<Row>`
      SELECT id::text AS id, event_id::text AS "eventId", topic, key, payload FROM event_outbox
      WHERE published_at IS NULL AND partition IN ${sql.in([...owned])}
      ORDER BY event_outbox.id LIMIT ${batchSize}`
    if (rows.length === 0) return 0
    yield* bus.publish(rows.map((row) => ({
      topic: row.topic,
      key: row.key,
      value: row.payload,
      headers: { "event-id": row.eventId }
    })))
    yield* sql`UPDATE event_outbox SET published_at = now() WHERE id IN ${sql.in(rows.map((row) => row.id))}`
    return rows.length
  })

  const loop = Effect.gen(function*() {
    // Whatever fails (a lost database surfaces as a defect too), the relay keeps going.
    const published = yield* relayBatch.pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logWarning("outbox relay failed; retrying", { error: String(Cause.squash(cause)) }).pipe(Effect.as(0))
      )
    )
    if (published < batchSize) yield* Queue.take(signal).pipe(Effect.timeoutOption(pollInterval))
  }).pipe(Effect.forever)

  yield* Effect.forkScoped(loop)

  return {
    own: (partition) => {
      owned.add(partition)
      Queue.offerUnsafe(signal, undefined)
    },
    disown: (partition) => {
      owned.delete(partition)
    },
    wake: () => {
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
