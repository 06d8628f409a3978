/**
 * Webhooks (`/{owner}/{name}/webhooks`): deliveries of the repository's `push`, `branch.created`
 * and `merge` events to a public URL, signed when a secret is set, and their delivery log.
 * Every endpoint needs write access, the listing and the delivery log included (URLs can be
 * credentials): a caller who may only read the repository is answered 404.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { BadRequest, Conflict, Forbidden, NotFound, OperationPending, PayloadTooLarge, ServiceUnavailable, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"

export const WebhookEvent = Schema.Literals(["push", "branch.created", "merge"])
export type WebhookEvent = typeof WebhookEvent.Type

export const Webhook = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  /** The events it receives (all three when none were chosen). */
  events: Schema.Array(WebhookEvent),
  /** Whether deliveries are signed (the secret itself is never returned). */
  has_secret: Schema.Boolean,
  /** A chat-service channel: it gets a readable message, unsigned. */
  chat: Schema.Boolean,
  created_by: Schema.String,
  created_at: Schema.String
})
export type Webhook = typeof Webhook.Type

export const URL_MAX = 2048
// oxlint-disable-next-line no-control-regex -- refusing control characters is the point
const NO_CONTROL = /^[^\u0000-\u001f\u007f-\u009f]+$/

/**
 * The document's `url`: an http(s) URL the server's egress check parses (WHATWG URL, no user
 * name, a host). The host is a dotted name whose last label starts with a letter, as a last
 * label that is a number makes the parser read an IPv4 address it may refuse as malformed; the
 * port 0-65535. A subset, so a value it admits is never refused as "not a valid absolute URL";
 * whether the host is public is known only by resolving it (address_not_allowed).
 */
export const URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9_-]+\\.)*[A-Za-z][A-Za-z0-9_-]*\\.?" +
  "(?::(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?" +
  "(?:[/?#][^\\u0000-\\u0020\\u007f-\\u009f]*)?$"

export const CreateWebhook = Schema.Struct({
  url: P.make({
    check: (value) =>
      value.length > URL_MAX
        ? { ok: false, reason: `url must be at most ${URL_MAX} characters` }
        : NO_CONTROL.test(value)
        ? { ok: true }
        : { ok: false, reason: "url must not be empty or contain control characters" },
    description: "An http or https URL (a host name, no user name or password) that resolves only to public addresses.",
    pattern: URL_PATTERN,
    minLength: 1,
    maxLength: URL_MAX,
    exact: false
  }),
  /** Signs deliveries; stored encrypted, never returned. */
  secret: Schema.optionalKey(F.Text("secret", 256)),
  /** Empty or absent: all three. */
  events: Schema.optionalKey(Schema.Array(WebhookEvent))
})

export const Delivery = Schema.Struct({
  /** The `X-Service-Delivery-Id` of every attempt. */
  id: Schema.String,
  event: WebhookEvent,
  /** `pending`, `delivering`, `retrying`, `succeeded`, `dead` (gave up after 24 hours) or `skipped` (address not allowed). */
  status: Schema.String,
  attempts: Schema.Number,
  /** The last attempt's HTTP status, its duration and what went wrong. */
  status_code: Schema.NullOr(Schema.Number),
  duration_ms: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.NullOr(Schema.String),
  redelivery_of: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})
export type Delivery = typeof Delivery.Type

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
export const Id = P.make({
  check: (value) => UUID.test(value) ? { ok: true } : { ok: false, reason: "id must be a lowercase UUID" },
  description: "A webhook's or a delivery's id (a UUID).",
  pattern: UUID.source,
  minLength: 36,
  maxLength: 36,
  exact: true
})

const Repo = P.OwnerRepo
const Hook = { ...P.OwnerRepo, id: Id }
const WriteErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, OperationPending, ServiceUnavailable] as const

export class WebhooksGroup extends HttpApiGroup.make("webhooks").add(
  HttpApiEndpoint.get("list", "/:owner/:name/webhooks", { params: Repo, success: Schema.Struct({ webhooks: Schema.Array(Webhook) }), error: [Unauthorized, Forbidden, NotFound, ServiceUnavailable] }),
  HttpApiEndpoint.post("create", "/:owner/:name/webhooks", { params: Repo, payload: CreateWebhook, success: Webhook.pipe(HttpApiSchema.status(201)), error: WriteErrors }),
  HttpApiEndpoint.delete("remove", "/:owner/:name/webhooks/:id", { params: Hook, success: HttpApiSchema.NoContent, error: WriteErrors }),
  HttpApiEndpoint.get("deliveries", "/:owner/:name/webhooks/:id/deliveries", {
    params: Hook,
    query: F.Page,
    success: Schema.Struct({ deliveries: Schema.Array(Delivery) }),
    error: [BadRequest, Unauthorized, Forbidden, NotFound, ServiceUnavailable]
  }),
  HttpApiEndpoint.post("redeliver", "/:owner/:name/webhooks/:id/deliveries/:delivery/redeliver", {
    params: { ...Hook, delivery: Id },
    success: Delivery.pipe(HttpApiSchema.status(202)),
    error: WriteErrors
  })
) {}
