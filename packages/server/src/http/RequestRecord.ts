/**
 * What is known of the request being served, for its access-log line and for every log line written
 * while it runs: its id, and the caller once authenticated. One small mutable object per request, put
 * in the fiber's context by the request middleware (ops/RequestLog.ts); the logger (ops/Logging.ts) reads it there,
 * so no log annotation is set up per request.
 */
import { Context } from "effect"

export interface RequestRecordShape {
  readonly id: string
  /** `user:<name>`, `service:<org>/<name>`, or undefined while anonymous. Never a token. */
  caller: string | undefined
  /** The route the router matched (its template is `path`), noted as its handler ends. */
  route: { readonly path: string } | undefined
}

export class RequestRecord extends Context.Service<RequestRecord, RequestRecordShape>()("grove/server/http/RequestRecord") {}

/** Notes who the caller is on the current request, if there is one (a no-op outside requests). */
export const noteCaller = (context: Context.Context<never>, principal: {
  readonly kind: string
  readonly username?: string
  readonly orgSlug?: string
  readonly name?: string
}) => {
  const record = Context.getOrUndefined(context, RequestRecord)
  if (record === undefined) return
  record.caller = principal.kind === "user"
    ? `user:${principal.username}`
    : principal.kind === "service_account"
    ? `service:${principal.orgSlug}/${principal.name}`
    : undefined
}
