/**
 * The transactional outbox, as handlers see it: events appended here are
 * written in the command's own transaction (with its reply) and published after it commits
 * (by the outbox relay, at least once, in order per partition), each with a
 * unique `id`.
 */
import { Context, Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import type { BusMessage } from "./Bus.ts"
import type { RelayedRow } from "./OutboxRelay.ts"
import * as Topics from "./Topics.ts"

export interface AppendOptions {
  /** Defaults to the command's partition key, so an entity's events stay in order. */
  readonly key?: string | undefined
  /** Defaults to `grove.events`. */
  readonly topic?: string | undefined
}

/** One `event_outbox` row. */
export interface OutboxRow {
  readonly eventId: string
  readonly partition: number
  readonly topic: string
  readonly key: string
  /** The published JSON, `{ ...event, id }`. */
  readonly payload: string
}

export interface OutboxShape {
  /**
   * Appends `event` (published as `{ ...event, id }`) and returns its id. Taken now, written with the command's
   * reply (`Inbox.complete`): a savepoint the handler rolls back does not take it back.
   */
  readonly append: (event: BusMessage, options?: AppendOptions) => Effect.Effect<string, SqlError>
  /**
   * The row `append` would write, for a handler that inserts it in one of its own statements in the
   * command's transaction (saving a round trip on a hot command). A row it does not insert is never published.
   */
  readonly row: (event: BusMessage, options?: AppendOptions) => OutboxRow
  /**
   * A row made by `row`, as the handler's statement stored it (its table id and stored payload, from that
   * statement's RETURNING): the reply's statement then need not read it back. Report only a row whose
   * statement ran in the command's own transaction, never inside a savepoint the handler may roll back:
   * a reported row is published as reported, whether or not it is still in the table.
   */
  readonly stored: (row: RelayedRow) => void
}

export class Outbox extends Context.Service<Outbox, OutboxShape>()("grove/bus/Outbox") {}

/** A command's outbox, as its transaction sees it. */
export interface CommandOutbox extends OutboxShape {
  /** The rows `append` took, in order: written with the command's reply, in one statement (`Inbox.complete`). */
  readonly appended: ReadonlyArray<OutboxRow>
}

/**
 * The outbox of one command: rows carry the command's partition, which the relay publishes in order. Appended
 * events are not written one statement each: they go into the table with the reply, after the rows the
 * handler inserted itself (`row`), still in the command's transaction.
 */
export const forCommand = (
  options: {
    readonly partition: number
    readonly key: string
    readonly onRow: (eventId: string) => void
    /** Rows its handler reported stored; by default ignored (they are read back with the rest). */
    readonly onStored?: ((row: RelayedRow) => void) | undefined
  }
): CommandOutbox => {
  const appended: Array<OutboxRow> = []
  const rowOf = (event: BusMessage, append?: AppendOptions): OutboxRow => {
    const id = randomUUID()
    return { eventId: id, partition: options.partition, topic: append?.topic ?? Topics.events, key: append?.key ?? options.key, payload: JSON.stringify({ ...event, id }) }
  }
  return {
    appended,
    row: (event, append) => {
      const r = rowOf(event, append)
      // Noted when made: the command's transaction reads back which of them its handler inserted.
      options.onRow(r.eventId)
      return r
    },
    stored: options.onStored ?? (() => {}),
    append: (event, append) =>
      Effect.sync(() => {
        const r = rowOf(event, append)
        appended.push(r)
        return r.eventId
      })
  }
}
