/**
 * The entity runtime's tables (packages/bus): the per-partition epoch fence,
 * the command inbox (dedup and stored replies) and the event outbox.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Who owns a command partition: each claim bumps the epoch, and every command
  // transaction checks it, so a stale owner after a rebalance is fenced off.
  yield* sql`CREATE TABLE partition_epochs (
    topic text NOT NULL,
    partition integer NOT NULL,
    epoch integer NOT NULL,
    owner text NOT NULL,
    committed_offset bigint NOT NULL DEFAULT -1,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
  )`
  // One row per command id, with its reply, written in the command's transaction.
  yield* sql`CREATE TABLE command_inbox (
    command_id text PRIMARY KEY,
    entity_type text NOT NULL,
    entity_id text NOT NULL,
    command text NOT NULL,
    partition integer NOT NULL,
    reply jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz
  )`
  yield* sql`CREATE INDEX command_inbox_created_at ON command_inbox (created_at)`
  // Events written in command transactions, published in id order per partition.
  yield* sql`CREATE TABLE event_outbox (
    id bigserial PRIMARY KEY,
    event_id uuid NOT NULL UNIQUE,
    partition integer NOT NULL,
    topic text NOT NULL,
    key text NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
  )`
  yield* sql`CREATE INDEX event_outbox_unpublished ON event_outbox (partition, id) WHERE published_at IS NULL`
  yield* sql`CREATE INDEX event_outbox_published_at ON event_outbox (published_at) WHERE published_at IS NOT NULL`
})
