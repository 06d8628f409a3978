/**
 * Webhooks and their deliveries. A delivery is made once per event and webhook (the unique key),
 * whatever the fan-out sees twice; its body is kept as the exact bytes sent, so every retry (and
 * its signature) is the same. Attempts are kept for the delivery log.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE webhooks (
    id uuid PRIMARY KEY,
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    url text NOT NULL,
    secret_sealed text,
    events jsonb NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`
  yield* sql`CREATE INDEX webhooks_repo ON webhooks (repo_id)`
  yield* sql`CREATE TABLE webhook_deliveries (
    id uuid PRIMARY KEY,
    webhook_id uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id text,
    redelivery_of uuid,
    event text NOT NULL,
    body text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'delivering', 'retrying', 'succeeded', 'dead', 'skipped')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz,
    last_status integer,
    last_error text,
    last_duration_ms integer,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (webhook_id, event_id)
  )`
  yield* sql`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'delivering', 'retrying')`
  yield* sql`CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, created_at DESC, id DESC)`
  yield* sql`CREATE TABLE webhook_attempts (
    delivery_id uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt integer NOT NULL,
    started_at timestamptz NOT NULL,
    status_code integer,
    duration_ms integer NOT NULL,
    error text,
    node text NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
  )`
})
