/**
 * Adding and removing a webhook are Repository entity commands: one transaction with the audit
 * row (the URL's host, never a secret) and a `webhooks.changed` event for the fan-out. The secret arrives sealed (see SecretBox); the URL was
 * checked against the egress rules at the edge.
 */
import { ApiWebhooks } from "@grove/api"
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { BranchRepositoryGone } from "../content/BranchCommands.ts"
import { audit, emit, load } from "../entities/CommandSupport.ts"
import { toApiWebhook, WEBHOOKS_CHANGED, type WebhookRow } from "./WebhookRecord.ts"

export class WebhookNotFound extends Schema.TaggedError<WebhookNotFound>()("WebhookNotFound", { id: Schema.String }) {}
export const WebhookError = Schema.Union([BranchRepositoryGone, WebhookNotFound])
export type WebhookError = typeof WebhookError.Type

export const AddPayload = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  sealedSecret: Schema.NullOr(Schema.String),
  events: Schema.Array(ApiWebhooks.WebhookEvent),
  actor: Schema.String
})
export const RemovePayload = Schema.Struct({ id: Schema.String, actor: Schema.String })

/** How many webhooks a repository may have. */
export const MAX_WEBHOOKS = 50

export class TooManyWebhooks extends Schema.TaggedError<TooManyWebhooks>()("TooManyWebhooks", { max: Schema.Number }) {}

const repository = Effect.fnUntraced(function*(entityId: string) {
  const repo = yield* load(entityId)
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: entityId })
  return repo
})

const host = (url: string) => {
  try {
    return new URL(url).host
  } catch {
    return ""
  }
}

const add = Effect.fn("Repository.addWebhook")(function*(payload: typeof AddPayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* repository(entityId)
  const [count] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM webhooks WHERE repo_id = ${repo.id}`
  if (Number(count?.n ?? 0) >= MAX_WEBHOOKS) return yield* new TooManyWebhooks({ max: MAX_WEBHOOKS })
  const rows = yield* sql<WebhookRow>`INSERT INTO webhooks ${
    sql.insert({
      id: payload.id,
      repo_id: repo.id,
      url: payload.url,
      secret_sealed: payload.sealedSecret,
      events: JSON.stringify(payload.events),
      created_by: payload.actor
    })
  } RETURNING *`
  yield* audit(repo.orgId, payload.actor, "webhook.add", `${repo.owner}/${repo.name}`, { id: payload.id, host: host(payload.url), events: payload.events })
  yield* emit(WEBHOOKS_CHANGED, { repository_id: repo.id })
  return toApiWebhook(rows[0]!)
})

const remove = Effect.fn("Repository.removeWebhook")(function*(payload: typeof RemovePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* repository(entityId)
  const rows = yield* sql<{ url: string }>`DELETE FROM webhooks WHERE id = ${payload.id} AND repo_id = ${repo.id} RETURNING url`
  if (rows[0] === undefined) return yield* new WebhookNotFound({ id: payload.id })
  yield* audit(repo.orgId, payload.actor, "webhook.remove", `${repo.owner}/${repo.name}`, { id: payload.id, host: host(rows[0].url) })
  yield* emit(WEBHOOKS_CHANGED, { repository_id: repo.id })
})

const AddError = Schema.Union([BranchRepositoryGone, WebhookNotFound, TooManyWebhooks])

export const commands = {
  AddWebhook: { payload: AddPayload, success: ApiWebhooks.Webhook, error: AddError },
  RemoveWebhook: { payload: RemovePayload, success: Schema.Void, error: WebhookError }
} as const

export const handlers = { AddWebhook: add, RemoveWebhook: remove }
