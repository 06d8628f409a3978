/**
 * Every error the API answers with has the body `{ error, code?, retryable? }`
 * (the spec's shape), one class per status. Clients tell errors apart by status
 * and `code`.
 */
import { Schema } from "effect"

const body = {
  error: Schema.String,
  code: Schema.optionalKey(Schema.String),
  retryable: Schema.optionalKey(Schema.Boolean)
}

export class BadRequest extends Schema.Error<BadRequest>("grove/BadRequest")(body, { httpApiStatus: 400 }) {}
export class Unauthorized extends Schema.Error<Unauthorized>("grove/Unauthorized")(body, { httpApiStatus: 401 }) {}
export class Forbidden extends Schema.Error<Forbidden>("grove/Forbidden")({
  ...body,
  /** The scope a key is missing, when that is why. */
  scope: Schema.optionalKey(Schema.String)
}, { httpApiStatus: 403 }) {}
export class NotFound extends Schema.Error<NotFound>("grove/NotFound")(body, { httpApiStatus: 404 }) {}
export class Conflict extends Schema.Error<Conflict>("grove/Conflict")({
  ...body,
  conflict_paths: Schema.optionalKey(Schema.Array(Schema.String)),
  /** What still holds the resource, e.g. an organization's repositories (`org_not_empty`). */
  repositories: Schema.optionalKey(Schema.Array(Schema.String))
}, { httpApiStatus: 409 }) {}
export class PreconditionFailed extends Schema.Error<PreconditionFailed>("grove/PreconditionFailed")(body, {
  httpApiStatus: 412
}) {}
export class PayloadTooLarge extends Schema.Error<PayloadTooLarge>("grove/PayloadTooLarge")(body, {
  httpApiStatus: 413
}) {}
/** Too many of something at once (e.g. a repository's open staged pushes); retry later. */
export class TooManyRequests extends Schema.Error<TooManyRequests>("grove/TooManyRequests")(body, {
  httpApiStatus: 429
}) {}
export class ServiceUnavailable extends Schema.Error<ServiceUnavailable>("grove/ServiceUnavailable")({
  ...body,
  /** Health: command partitions assigned to this node that no live worker has claimed. */
  unserved_partitions: Schema.optionalKey(Schema.Array(Schema.Number)),
  /** Health: false while the message bus cannot be reached. */
  bus_reachable: Schema.optionalKey(Schema.Boolean)
}, {
  httpApiStatus: 503
}) {}

/**
 * A write whose command did not finish within the request's deadline. It may
 * still be applied: poll `GET /operations/{operation_id}`; never retry it under
 * a new id.
 */
export class OperationPending extends Schema.Error<OperationPending>("grove/OperationPending")({
  ...body,
  operation_id: Schema.String
}, { httpApiStatus: 202 }) {}

export type ApiError =
  | BadRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | PreconditionFailed
  | PayloadTooLarge
  | TooManyRequests
  | ServiceUnavailable
  | OperationPending
