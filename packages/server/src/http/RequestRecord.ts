/**
 * What is known of the request being served, for its access-log line and for every log line written
 * while it runs: its id, the caller once authenticated, the matched route. One small mutable object per
 * request, kept beside the request object (a weak map: a `Context.add` per request would copy the whole
 * service map), found from any fiber whose context holds the request, which forked fibers inherit.
 * Made by the request middleware (ops/RequestLog.ts); read by the logger (ops/Logging.ts).
 */
import { Context } from "effect"
import { HttpServerRequest } from "effect/http"

export interface RequestRecordShape {
  readonly id: string
  /** `user:<name>`, `service:<org>/<name>`, or undefined while anonymous. Never a token. */
  caller: string | undefined
  /** The route the router matched (its template is `path`), noted as its handler ends. */
  route: { readonly path: string } | undefined
}

// Keyed by the server's own request object (node's IncomingMessage), so the node request listener
// finds the record too once the Effect app is done (fast-reads/ learns the matched route from it).
const records = new WeakMap<object, RequestRecordShape>()

export const attach = (request: HttpServerRequest.HttpServerRequest, record: RequestRecordShape) => {
  records.set(request.source, record)
}

/** The record of the request in `context`, if it holds one. */
export const recordIn = (context: Context.Context<never>): RequestRecordShape | undefined => {
  const request = Context.getOrUndefined(context, HttpServerRequest.HttpServerRequest)
  return request === undefined ? undefined : records.get(request.source)
}

/** The record of a server request object (node's IncomingMessage), once the app has attached one. */
export const recordOfSource = (source: object): RequestRecordShape | undefined => records.get(source)

interface LabelledPrincipal {
  readonly kind: string
  readonly username?: string
  readonly orgSlug?: string
  readonly name?: string
}

/** Labels made, per principal object (a cached token row's caller keeps its principal: one string, not one per request). */
const labels = new WeakMap<LabelledPrincipal, string>()

/** How the access log names a caller: `user:<name>`, `service:<org>/<name>`, undefined for anonymous. */
export const callerLabel = (principal: LabelledPrincipal): string | undefined => {
  if (principal.kind !== "user" && principal.kind !== "service_account") return undefined
  let label = labels.get(principal)
  if (label === undefined) {
    labels.set(principal, label = principal.kind === "user" ? `user:${principal.username}` : `service:${principal.orgSlug}/${principal.name}`)
  }
  return label
}

/** Notes who the caller is on the current request, if there is one (a no-op outside requests). */
export const noteCaller = (context: Context.Context<never>, principal: {
  readonly kind: string
  readonly username?: string
  readonly orgSlug?: string
  readonly name?: string
}) => {
  const record = recordIn(context)
  if (record === undefined) return
  record.caller = callerLabel(principal)
}
