/** The webhook commands' typed errors and the one mapping from them to the API's answers. */
import { Schema } from "effect"
import { apiErrorOf, storedErrorAnswer } from "../http/Failures.ts"
import { TooManyWebhooks, WebhookError } from "./WebhookCommands.ts"

const AnyWebhookError = Schema.Union([WebhookError, TooManyWebhooks])
type AnyWebhookError = typeof AnyWebhookError.Type

export const webhookErrorResponse = (error: AnyWebhookError) => {
  switch (error._tag) {
    case "BranchRepositoryGone":
      return { status: 404, body: { error: `repository ${error.fullName} not found`, code: "not_found" } } as const
    case "WebhookNotFound":
      return { status: 404, body: { error: `webhook ${error.id} not found`, code: "not_found" } } as const
    case "TooManyWebhooks":
      return { status: 409, body: { error: `a repository may have at most ${error.max} webhooks`, code: "too_many_webhooks" } } as const
  }
}

export const storedWebhookErrorResponse = storedErrorAnswer(AnyWebhookError, webhookErrorResponse)

export const webhookApiError = (error: AnyWebhookError) => {
  const { status, body } = webhookErrorResponse(error)
  return apiErrorOf(status, body)
}
