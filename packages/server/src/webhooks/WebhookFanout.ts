/**
 * The fan-out: a consumer of `grove.events` (group `grove.webhook-fanout`) turns each `push`,
 * `branch.created` and `merge` into one delivery per webhook that receives it, and tells the
 * delivery workers on `grove.webhook-deliveries` (keyed by webhook id, so an operator can tail it
 * with kcat). A delivery is made once per event and webhook (the table's unique key on the event's
 * id), so an event seen again after the consumer was killed makes nothing new; a delivery not yet
 * attempted is announced again, which is harmless (an attempt claims it first).
 */
import { Bus, Topics } from "@grove/bus"
import { Cause, Effect, Layer, Schedule, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type RepositoryEvent, repositoryEventOf } from "../events/RepositoryEvent.ts"
import { DELIVERIES_TOPIC } from "./WebhookDelivery.ts"
import { payloadBody } from "./WebhookPayload.ts"
import { eventsOf, forgottenBy, type WebhookRow } from "./WebhookRecord.ts"
import { Webhooks } from "./Webhooks.ts"

export const FANOUT_GROUP = "grove.webhook-fanout"

/** Repositories whose webhooks one partition's fan-out remembers; past this it starts again from none. */
const REMEMBERED_REPOSITORIES = 10_000

export const WebhookFanoutLive = Layer.effectDiscard(Effect.gen(function*() {
  const bus = yield* Bus.Bus
  const sql = yield* SqlClient.SqlClient
  const webhooks = yield* Webhooks

  /**
   * `known`: the webhooks of the repositories this partition's events named, as those events left them. A
   * repository's events are all in one partition while its key `owner/name` stays, its webhook commands'
   * `webhooks.changed` among them in order, so what is remembered is exact for the events that follow; it
   * lives as long as the claim (a partition claimed again, after another node had it, starts from none).
   * A transfer changes the key: its `repository.transferred` is the last event under the old key (emitted
   * by the command on that key, so in this partition, in order), and the repository is forgotten there, as
   * changes made under other keys are not seen here. Most repositories have no webhooks: their events cost
   * no read.
   */
  const fanOut = Effect.fnUntraced(function*(event: RepositoryEvent, known: Map<string, ReadonlyArray<WebhookRow>>) {
    let all = known.get(event.repository_id)
    if (all === undefined) {
      all = yield* webhooks.ofRepository(event.repository_id)
      if (known.size >= REMEMBERED_REPOSITORIES) known.clear()
      known.set(event.repository_id, all)
    }
    const hooks = all.filter((hook) => eventsOf(hook).includes(event.type))
    if (hooks.length === 0) return
    const body = payloadBody({ ...event, event: event.type })
    const notices = []
    for (const hook of hooks) {
      // A webhook gone with its repository (no `webhooks.changed`) gets nothing.
      yield* sql`INSERT INTO webhook_deliveries (id, webhook_id, event_id, event, body, status)
        SELECT ${randomUUID()}::uuid, id, ${event.id}, ${event.type}, ${body}, 'pending' FROM webhooks WHERE id = ${hook.id}
        ON CONFLICT (webhook_id, event_id) DO NOTHING`
      const [row] = yield* sql<{ id: string; status: string; attempts: number }>`SELECT id, status, attempts FROM webhook_deliveries
        WHERE webhook_id = ${hook.id} AND event_id = ${event.id}`
      if (row !== undefined && row.status === "pending" && row.attempts === 0) {
        notices.push({ topic: DELIVERIES_TOPIC, key: hook.id, value: { type: "webhook.delivery", v: 1, delivery_id: row.id, webhook_id: hook.id, event: event.type, event_id: event.id } })
      }
    }
    if (notices.length > 0) yield* bus.publish(notices)
  })

  yield* bus.consume(FANOUT_GROUP, Topics.events, (claim) => {
    const known = new Map<string, ReadonlyArray<WebhookRow>>()
    return claim.records.pipe(Stream.runForEach((record) =>
      Effect.gen(function*() {
        const forgotten = forgottenBy(record.value)
        if (forgotten !== undefined) known.delete(forgotten)
        const event = repositoryEventOf(record.value)
        if (event !== undefined) {
          yield* fanOut(event, known).pipe(
            Effect.tapCause((cause) => Effect.logWarning(`webhook fan-out of event ${event.id} failed; retrying`, Cause.squash(cause))),
            Effect.retry({ schedule: Schedule.exponential("200 millis", 1.5), times: 20 }),
            Effect.catchCause((cause) => Effect.logError(`webhook fan-out of event ${event.id} gave up`, Cause.squash(cause)))
          )
        }
        yield* claim.commit(record.offset)
      })
    ))
  })
}))
