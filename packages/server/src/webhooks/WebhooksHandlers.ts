/**
 * The webhook endpoints. Every one needs write access, listing and the delivery log included: a URL
 * can be a credential (a chat service's channel webhook) and a delivery error can echo the receiver's
 * answer, so a caller who may only read the repository (anonymous readers of a public one included)
 * is answered 404, as if there were none to see. A URL is checked by the egress rules before it is stored (400 `address_not_allowed`,
 * with the rule it broke and no resolution details); the secret is sealed here and never returned.
 */
import { ApiErrors, GroveApi } from "@grove/api"
import { Bus } from "@grove/bus"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { callerRepository } from "../access/Authorizer.ts"
import { SecretBox } from "../ci/CiSecrets.ts"
import { Egress } from "../egress/Egress.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable, gatewayApiError, isGatewayFailure } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import type { GatewayFailure } from "../entities/Sending.ts"
import { DELIVERIES_TOPIC, secretSlot } from "./WebhookDelivery.ts"
import { webhookApiError } from "./WebhookErrors.ts"
import type { TooManyWebhooks, WebhookError } from "./WebhookCommands.ts"
import { WebhookGateway } from "./WebhookGateway.ts"
import { toApiDelivery, type DeliveryRow, Webhooks } from "./Webhooks.ts"

const failure = (error: WebhookError | TooManyWebhooks | GatewayFailure) =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : webhookApiError(error))

export const WebhooksHandlers = HttpApiBuilder.group(GroveApi, "webhooks", Effect.fn(function*(handlers) {
  const webhooks = yield* Webhooks
  const gateway = yield* WebhookGateway
  const egress = yield* Egress
  const box = yield* SecretBox
  const sql = yield* SqlClient.SqlClient
  const bus = yield* Bus.Bus

  const repository = callerRepository
  /** Write access, or 404: reading the repository is not enough to see its webhooks (not even that it has any). */
  const managed = (params: { readonly owner: string; readonly name: string }) =>
    repository(params, "write").pipe(Effect.mapError((error) =>
      error instanceof ApiErrors.Unauthorized || error instanceof ApiErrors.Forbidden
        ? new ApiErrors.NotFound({ error: "no webhooks to show: they are shown to those who may write to the repository", code: "not_found" })
        : error
    ))
  const hookOf = (repoId: string, id: string) =>
    Effect.gen(function*() {
      const hook = yield* dbUnavailable(webhooks.find(repoId, id))
      if (hook === undefined) return yield* new ApiErrors.NotFound({ error: `webhook ${id} not found`, code: "not_found" })
      return hook
    })

  return handlers.handleAll({
    list: Effect.fn(function*({ params }) {
      const repo = yield* managed(params)
      return { webhooks: yield* dbUnavailable(webhooks.list(repo.id)) }
    }),
    create: Effect.fn(function*({ params, payload }) {
      const repo = yield* repository(params, "write")
      const url = yield* egress.check(payload.url).pipe(
        Effect.mapError((refused) => new ApiErrors.BadRequest({ error: `the webhook URL is not allowed: ${refused.reason}`, code: "address_not_allowed" }))
      )
      const id = randomUUID()
      const events = [...new Set(payload.events ?? [])]
      return yield* gateway.add(repositoryKey(repo.owner, repo.name), {
        id,
        url: url.href,
        sealedSecret: payload.secret === undefined ? null : box.seal(repo.id, secretSlot(id), payload.secret),
        events,
        actor: yield* actorName
      }, yield* commandRequest).pipe(Effect.catch(failure))
    }),
    remove: Effect.fn(function*({ params }) {
      const repo = yield* repository(params, "write")
      yield* gateway.remove(repositoryKey(repo.owner, repo.name), { id: params.id, actor: yield* actorName }, yield* commandRequest).pipe(
        Effect.catch(failure)
      )
    }),
    deliveries: Effect.fn(function*({ params, query }) {
      const repo = yield* managed(params)
      yield* hookOf(repo.id, params.id)
      const page = yield* pageRequest(query, ["timestamp", "uuid"])
      return { deliveries: yield* pageResponse(yield* dbUnavailable(webhooks.deliveries(params.id, page)), page) }
    }),
    redeliver: Effect.fn(function*({ params }) {
      const repo = yield* repository(params, "write")
      yield* hookOf(repo.id, params.id)
      const original = yield* dbUnavailable(webhooks.delivery(params.id, params.delivery))
      if (original === undefined) return yield* new ApiErrors.NotFound({ error: `delivery ${params.delivery} not found`, code: "not_found" })
      // A new delivery (its own id) of the same body; the original keeps its record.
      const [row] = yield* dbUnavailable(sql<DeliveryRow>`INSERT INTO webhook_deliveries ${
        sql.insert({ id: randomUUID(), webhook_id: params.id, redelivery_of: original.id, event: original.event, body: original.body, status: "pending" })
      } RETURNING *`)
      yield* bus.publish([{
        topic: DELIVERIES_TOPIC,
        key: params.id,
        value: { type: "webhook.delivery", v: 1, delivery_id: row!.id, webhook_id: params.id, event: original.event }
      }]).pipe(Effect.ignore)
      return toApiDelivery(row!)
    })
  })
}))
