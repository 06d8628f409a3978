/**
 * The pages' writes. A form posts to a page route, which checks the form came from this site (Origin
 * and the masked CSRF token) and then sends the same request to the JSON API on this node, with the
 * browser's session as its bearer token: the write goes through the API's own handler (its checks,
 * its entity command and compare-and-set, its audit row), so the web interface has no second copy
 * of any rule. A hidden per-form Idempotency-Key makes a double submit land once.
 */
import { ApiErrors } from "@grove/api"
import { Effect } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { randomUUID } from "node:crypto"
import { ServerConfig } from "../Config.ts"
import { sameOrigin } from "./CliAuthPage.ts"
import { csrfField } from "./Layout.ts"
import { html, type Node } from "./Render.ts"
import { checkCsrf, type PageSession } from "./Session.ts"

/** Forms are a few fields; anything larger is not one of ours. */
const FORM_LIMIT = 64 * 1024

/** The submitted fields, once the form is known to come from this site's page in this browser. */
export const submittedForm = (session: PageSession) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const config = yield* ServerConfig
    const text = yield* request.text.pipe(Effect.orElseSucceed(() => undefined))
    if (text === undefined || text.length > FORM_LIMIT) {
      return yield* new ApiErrors.PayloadTooLarge({ error: "the form is too large", code: "payload_too_large" })
    }
    const fields = new URLSearchParams(text)
    if (!sameOrigin(request, config.siteUrl) || !checkCsrf(fields.get("csrf") ?? "", session.csrfSecret)) {
      return yield* new ApiErrors.Forbidden({
        error: "This form did not come from this site's page, or it expired. Go back, reload the page and try again.",
        code: "csrf"
      })
    }
    return fields
  })

/** A fresh idempotency key for a form: a second submit of the same form replays the first answer. */
export const idempotencyField = (): Node => html`<input type="hidden" name="idem" value=${randomUUID()} />`

export interface ApiAnswer {
  readonly status: number
  readonly body: Record<string, unknown>
}

/** This node's own listener, as a loopback client reaches it. */
const selfOrigin = (host: string, port: number) => {
  const loopback = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host
  return `http://${loopback.includes(":") ? `[${loopback}]` : loopback}:${port}`
}

/**
 * The API's answer to `method /api{path}` on the signed-in user's behalf. A network failure is a
 * 503 (retryable); every answer, success or refusal, is returned for the page to show.
 */
export const callApi = (
  session: PageSession,
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE",
  path: string,
  options: { readonly body?: unknown; readonly idempotencyKey?: string | null | undefined } = {}
) =>
  Effect.gen(function*() {
    if (session.token === undefined) {
      return yield* new ApiErrors.Unauthorized({ error: "Sign in to do that.", code: "unauthenticated" })
    }
    const config = yield* ServerConfig
    const key = options.idempotencyKey
    const headers: Record<string, string> = {
      authorization: `Bearer ${session.token}`,
      accept: "application/json",
      ...(options.body === undefined ? {} : { "content-type": "application/json" }),
      ...(key !== undefined && key !== null && /^[0-9a-f-]{36}$/.test(key) ? { "idempotency-key": `web:${key}` } : {})
    }
    return yield* Effect.tryPromise({
      try: async (signal): Promise<ApiAnswer> => {
        const response = await fetch(`${selfOrigin(config.host, config.port)}/api${path}`, {
          method,
          headers,
          signal,
          ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
        })
        const text = await response.text()
        let body: Record<string, unknown> = {}
        try {
          const parsed: unknown = text === "" ? {} : JSON.parse(text)
          if (parsed !== null && typeof parsed === "object") body = parsed as Record<string, unknown>
        } catch {
          body = { error: text.slice(0, 500) }
        }
        return { status: response.status, body }
      },
      catch: () => new ApiErrors.ServiceUnavailable({ error: "the server could not be reached; try again", code: "unavailable", retryable: true })
    })
  })

/** A path segment for an API or page address (a branch's `/` becomes %2F, as the Oak client sends it). */
export const segment = (value: string) => encodeURIComponent(value)

/** What a page shows above itself after a form: the status to answer with and the message. */
export interface Notice {
  readonly status: number
  readonly body: Node
}

/** The API's refusal of a form's request, as a notice (its `error` text, or the status). */
export const apiRefusal = (answer: ApiAnswer): Notice => ({
  status: answer.status,
  body: html`<p class="notice bad" role="alert">${typeof answer.body["error"] === "string" ? answer.body["error"] : `The server answered ${answer.status}.`}</p>`
})

export interface ApiRequest {
  readonly method: "POST" | "PUT" | "PATCH" | "DELETE"
  readonly path: string
  readonly body?: unknown
}

/**
 * A form's write: the form checked, then `request` of its fields sent to the API (with the form's
 * Idempotency-Key). A success goes back to `back` (303, so a reload does not post again); a refusal
 * shows the page again with the API's error and status.
 */
export const formWrite = <E, R>(
  session: PageSession,
  request: (fields: URLSearchParams) => ApiRequest,
  back: string | ((fields: URLSearchParams, answer: ApiAnswer) => string),
  page: (notice: Notice) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) =>
  Effect.gen(function*() {
    const fields = yield* submittedForm(session)
    const { method, path, body } = request(fields)
    const answer = yield* callApi(session, method, path, { body, idempotencyKey: fields.get("idem") })
    if (answer.status >= 300) return yield* page(apiRefusal(answer))
    return HttpServerResponse.redirect(typeof back === "string" ? back : back(fields, answer), { status: 303 })
  })

/** A one-button form posting to `action` (with the CSRF token, an idempotency key and any hidden fields). */
export const postButton = (
  session: PageSession,
  action: string,
  label: string,
  options: { readonly danger?: boolean; readonly primary?: boolean; readonly ariaLabel?: string; readonly fields?: Record<string, string> } = {}
): Node =>
  html`<form method="post" action=${action} class="inline">${csrfField(session)}${idempotencyField()}${
    Object.entries(options.fields ?? {}).map(([name, value]) => html`<input type="hidden" name=${name} value=${value} />`)
  }<button type="submit" class=${options.danger === true ? "danger" : options.primary === true ? "primary" : undefined} aria-label=${options.ariaLabel}>${label}</button></form>`
