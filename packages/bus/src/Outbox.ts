/**
 * The transactional outbox, as handlers see it: events appended here are
 * written in the command's own transaction and published after it commits
 * (by the outbox relay, at least once, in order per partition), each with a
 * unique `id`.
 */
import { Context, Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import type { BusMessage } from "./Bus.ts"
import * as Topics from "./Topics.ts"

export interface AppendOptions {
  /** Defaults to the command's partition key, so an entity's events stay in order. */
  readonly key?: string | undefined
  /** Defaults to `grove.events`. */
  readonly topic?: string | undefined
}

export interface OutboxShape {
  /** Appends `event` (published as `{ ...event, id }`) and returns its id. */
  readonly append: (event: BusMessage, options?: AppendOptions) => Effect.Effect<string, SqlError>
}

export class Outbox extends Context.Service<Outbox, OutboxShape>()("grove/bus/Outbox") {}

/** The outbox of one command: rows carry the command's partition, which the relay publishes in order. */
export const forCommand = (
  sql: SqlClient.SqlClient,
  options: { readonly partition: number; readonly key: string; readonly onAppend: () => void }
): OutboxShape => ({
  append: (event, append) =>
    Effect.gen(function*() {
      const id = randomUUID()
      yield* sql`INSERT INTO event_outbox (event_id, partition, topic, key, payload) VALUES (
        ${id}, ${options.partition}, ${append?.topic ?? Topics.events}, ${append?.key ?? options.key},
        ${JSON.stringify({ ...event, id })}::jsonb)`
      options.onAppend()
      return id
    })
})
