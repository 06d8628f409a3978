/** Webhooks and their delivery log: the read side (changes are Repository entity commands). */
import type { ApiWebhooks } from "@grove/api"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"
import { toApiWebhook, type WebhookRow } from "./WebhookRecord.ts"

export interface DeliveryRow {
  readonly id: string
  readonly webhook_id: string
  readonly event: string
  readonly body: string
  readonly status: string
  readonly attempts: number
  readonly next_attempt_at: Date | string | null
  readonly redelivery_of: string | null
  readonly last_status: number | null
  readonly last_error: string | null
  readonly last_duration_ms: number | null
  readonly created_at: Date | string
  readonly updated_at: Date | string
}

const iso = (value: Date | string | null) => value === null ? null : new Date(value).toISOString()

export const toApiDelivery = (row: DeliveryRow): ApiWebhooks.Delivery => ({
  id: row.id,
  event: row.event as ApiWebhooks.WebhookEvent,
  status: row.status,
  attempts: row.attempts,
  status_code: row.last_status,
  duration_ms: row.last_duration_ms,
  error: row.last_error,
  next_attempt_at: row.status === "pending" || row.status === "retrying" ? iso(row.next_attempt_at) : null,
  redelivery_of: row.redelivery_of,
  created_at: iso(row.created_at)!,
  updated_at: iso(row.updated_at)!
})

export class Webhooks extends Context.Service<Webhooks, {
  readonly list: (repoId: string) => Effect.Effect<ReadonlyArray<ApiWebhooks.Webhook>, SqlError>
  readonly find: (repoId: string, id: string) => Effect.Effect<WebhookRow | undefined, SqlError>
  /** The repository's webhooks, each with the events it receives (`eventsOf`). */
  readonly ofRepository: (repoId: string) => Effect.Effect<ReadonlyArray<WebhookRow>, SqlError>
  /** One page of a webhook's deliveries, newest first. */
  readonly deliveries: (webhookId: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<ApiWebhooks.Delivery>>, SqlError>
  readonly delivery: (webhookId: string, id: string) => Effect.Effect<DeliveryRow | undefined, SqlError>
}>()("grove/server/webhooks/Webhooks") {
  static readonly layer = Layer.effect(Webhooks, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const newestFirst: ReadonlyArray<KeyColumn> = [
      { expr: sql`created_at`, descending: true, cast: "timestamptz", read: sql`created_at::text` },
      { expr: sql`id`, descending: true, cast: "uuid" }
    ]
    return Webhooks.of({
      list: (repoId) =>
        sql<WebhookRow>`SELECT * FROM webhooks WHERE repo_id = ${repoId} ORDER BY created_at, id`.pipe(Effect.map((rows) => rows.map(toApiWebhook))),
      find: (repoId, id) => sql<WebhookRow>`SELECT * FROM webhooks WHERE repo_id = ${repoId} AND id = ${id}`.pipe(Effect.map((rows) => rows[0])),
      ofRepository: (repoId) => sql<WebhookRow>`SELECT * FROM webhooks WHERE repo_id = ${repoId} ORDER BY created_at, id`,
      deliveries: (webhookId, page) =>
        sql<DeliveryRow>`SELECT * ${Keyset.selectKeys(sql, newestFirst)} FROM webhook_deliveries
          WHERE webhook_id = ${webhookId} AND ${Keyset.after(sql, newestFirst, page.after)}
          ${Keyset.orderBy(sql, newestFirst)} ${Keyset.limitPlusOne(sql, page)}`.pipe(
          Effect.map((rows) => Keyset.keyed(rows, newestFirst).map(({ key, row }) => ({ key, row: toApiDelivery(row) })))
        ),
      delivery: (webhookId, id) =>
        sql<DeliveryRow>`SELECT * FROM webhook_deliveries WHERE webhook_id = ${webhookId} AND id = ${id}`.pipe(Effect.map((rows) => rows[0]))
    })
  }))
}
