/**
 * Making deliveries, on every node. The table `webhook_deliveries` is the durable queue; the topic
 * `grove.webhook-deliveries` only tells a node to try now. An attempt first claims its delivery
 * (a compare-and-set: due, not leased), POSTs through the egress client (10 s, at most 64 KiB of
 * the answer read) and records the outcome with the attempt in one transaction: `succeeded` on a
 * 2xx; `skipped` when the address is not allowed; otherwise `retrying` after an exponential
 * backoff with jitter, and `dead` once the delivery is a day old.
 *
 * A slow receiver delays only its own webhook: attempts run in a pool (`webhookConcurrency` at
 * once, one at a time per webhook), never inside the consumer of a partition, and a retry waits in
 * the table (the poller picks it up when due), not in a consumer. The poller also picks up
 * deliveries whose node died mid-attempt (their lease ran out) or whose notice was lost.
 */
import { Bus, MetricHandles } from "@grove/bus"
import { Cause, Effect, Layer, Semaphore, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { SecretBox } from "../ci/CiSecrets.ts"
import { ServerConfig } from "../Config.ts"
import { Egress } from "../egress/Egress.ts"
import { backoffSeconds, chatBody, deliveryHeaders, GIVE_UP_AFTER_MS } from "./WebhookPayload.ts"
import { isChatUrl } from "./WebhookRecord.ts"

export const DELIVERIES_TOPIC = "grove.webhook-deliveries"
export const WORKERS_GROUP = "grove.webhook-workers"
const LEASE_SECONDS = 30
const TIMEOUT_MS = 10_000
const MAX_RESPONSE_BYTES = 64 * 1024
/** A pending delivery no notice reached is picked up by the poller after this long. */
const NOTICE_GRACE_MS = 3_000

/** This node's delivery attempts, by outcome (`succeeded`, `retrying`, `dead`, `skipped`). */
const attemptsTotal = MetricHandles.counterSeries("grove_webhook_delivery_attempts_total", "Webhook delivery attempts this node made, by outcome")

/** The secret's slot in SecretBox terms: the webhook's id binds its ciphertext. */
export const secretSlot = (webhookId: string) => `webhook:${webhookId}`

interface Claimed {
  readonly id: string
  readonly webhook_id: string
  readonly event: string
  readonly body: string
  readonly attempts: number
  readonly created_at: Date | string
  readonly url: string
  readonly repo_id: string
  readonly secret_sealed: string | null
}

export const makeDeliverer = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const egress = yield* Egress
  const box = yield* SecretBox
  const config = yield* ServerConfig
  const node = config.nodeId
  const retryBase = (config.webhookRetryBaseMs ?? 10_000) / 1000

  const claim = (id: string) =>
    sql<Claimed>`UPDATE webhook_deliveries d SET status = 'delivering', attempts = d.attempts + 1,
        lease_until = now() + make_interval(secs => ${LEASE_SECONDS}), updated_at = now()
      FROM webhooks w
      WHERE d.id = ${id} AND w.id = d.webhook_id AND (
        (d.status IN ('pending', 'retrying') AND d.next_attempt_at <= now()) OR (d.status = 'delivering' AND d.lease_until < now()))
      RETURNING d.id, d.webhook_id, d.event, d.body, d.attempts, d.created_at, w.url, w.repo_id, w.secret_sealed`.pipe(
      Effect.map((rows) => rows[0])
    )

  const record = (claimed: Claimed, outcome: {
    readonly status: "succeeded" | "retrying" | "dead" | "skipped"
    readonly code: number | null
    readonly error: string | null
    readonly durationMs: number
    readonly startedAt: Date
    readonly nextAttemptAt: Date | null
  }) =>
    sql.withTransaction(Effect.gen(function*() {
      // Still ours: claimed by this attempt (a lease that ran out may have passed it to another node).
      const updated = yield* sql`UPDATE webhook_deliveries SET status = ${outcome.status}, last_status = ${outcome.code},
          last_error = ${outcome.error}, last_duration_ms = ${outcome.durationMs}, lease_until = NULL, updated_at = now(),
          next_attempt_at = ${outcome.nextAttemptAt ?? new Date()}
        WHERE id = ${claimed.id} AND status = 'delivering' AND attempts = ${claimed.attempts} RETURNING id`
      if (updated.length === 0) return false
      yield* sql`INSERT INTO webhook_attempts ${
        sql.insert({
          delivery_id: claimed.id,
          attempt: claimed.attempts,
          started_at: outcome.startedAt,
          status_code: outcome.code,
          duration_ms: outcome.durationMs,
          error: outcome.error,
          node
        })
      } ON CONFLICT DO NOTHING`
      return true
    })).pipe(
      // Counted once recorded (an attempt whose lease another node took over is that node's to count).
      Effect.tap((recorded) => Effect.sync(() => {
        if (recorded) attemptsTotal(outcome.status, () => ({ outcome: outcome.status })).updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
      }))
    )

  /** One attempt of a delivery, if it is due and nobody else holds it. */
  const attempt = Effect.fnUntraced(function*(id: string) {
    const claimed = yield* claim(id)
    if (claimed === undefined) return
    const startedAt = new Date()
    const chat = isChatUrl(claimed.url)
    const secret = claimed.secret_sealed === null ? undefined : box.open(claimed.repo_id, secretSlot(claimed.webhook_id), claimed.secret_sealed)
    const body = chat ? chatBody(JSON.parse(claimed.body)) : claimed.body
    const headers = deliveryHeaders({ event: claimed.event, deliveryId: claimed.id, body, secret, chat, now: startedAt })
    const result = yield* egress.post(claimed.url, { headers, body, timeoutMs: TIMEOUT_MS, maxResponseBytes: MAX_RESPONSE_BYTES }).pipe(Effect.result)
    const durationMs = Date.now() - startedAt.getTime()
    const retry = (code: number | null, error: string) => {
      const old = Date.now() - new Date(claimed.created_at).getTime() >= GIVE_UP_AFTER_MS
      return {
        status: old ? "dead" as const : "retrying" as const,
        code,
        error: old ? `${error}; gave up after 24 hours` : error,
        durationMs,
        startedAt,
        nextAttemptAt: old ? null : new Date(Date.now() + backoffSeconds(claimed.attempts, Math.random, retryBase) * 1000)
      }
    }
    if (result._tag === "Success") {
      const answer = result.success
      yield* record(claimed, answer.status >= 200 && answer.status < 300
        ? { status: "succeeded", code: answer.status, error: null, durationMs: answer.durationMs, startedAt, nextAttemptAt: null }
        : retry(answer.status, `the receiver answered ${answer.status}`))
    } else if (result.failure._tag === "EgressRefused") {
      yield* record(claimed, { status: "skipped", code: null, error: `not delivered: ${result.failure.reason}`, durationMs, startedAt, nextAttemptAt: null })
    } else {
      yield* record(claimed, retry(null, result.failure.message))
    }
  })

  const due = sql<{ id: string; webhook_id: string }>`SELECT id, webhook_id FROM webhook_deliveries
    WHERE (status = 'retrying' AND next_attempt_at <= now())
      OR (status = 'pending' AND next_attempt_at <= now() - make_interval(secs => ${NOTICE_GRACE_MS / 1000}))
      OR (status = 'delivering' AND lease_until < now())
    ORDER BY next_attempt_at LIMIT 200`

  return { attempt, due }
})

export const WebhookDeliveryLive = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* ServerConfig
  const bus = yield* Bus.Bus
  const deliverer = yield* makeDeliverer
  const pool = yield* Semaphore.make(config.webhookConcurrency ?? 32)
  const perWebhook = new Map<string, Semaphore.Semaphore>()
  const inFlight = new Set<string>()

  /** Starts an attempt in the pool (one at a time per webhook) unless this node is already on it. */
  const schedule = (id: string, webhookId: string) =>
    Effect.suspend(() => {
      if (inFlight.has(id)) return Effect.void
      inFlight.add(id)
      let lane = perWebhook.get(webhookId)
      if (lane === undefined) {
        lane = Semaphore.makeUnsafe(1)
        perWebhook.set(webhookId, lane)
      }
      return deliverer.attempt(id).pipe(
        lane.withPermits(1),
        pool.withPermits(1),
        Effect.catchCause((cause) => Effect.logWarning(`webhook delivery ${id} failed to run`, Cause.squash(cause))),
        Effect.ensuring(Effect.sync(() => inFlight.delete(id))),
        Effect.forkScoped,
        Effect.asVoid
      )
    })

  yield* bus.consume(WORKERS_GROUP, DELIVERIES_TOPIC, (claim) =>
    claim.records.pipe(Stream.runForEach((record) =>
      Effect.gen(function*() {
        const value = record.value as { delivery_id?: unknown; webhook_id?: unknown } | null
        if (typeof value?.delivery_id === "string" && typeof value.webhook_id === "string") yield* schedule(value.delivery_id, value.webhook_id)
        // Handed to the pool: the table holds the delivery until it is done.
        yield* claim.commit(record.offset)
      })
    )))

  yield* Effect.forever(Effect.gen(function*() {
    yield* Effect.sleep("1 second")
    for (const row of yield* deliverer.due) yield* schedule(row.id, row.webhook_id)
  }).pipe(Effect.catchCause((cause) => Effect.logWarning("webhook retry poll failed", Cause.squash(cause))))).pipe(Effect.forkScoped)
}))
