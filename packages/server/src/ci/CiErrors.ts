/** CI's typed errors (stored as command replies) and the one mapping from them to the API's answers. */
import { ApiErrors } from "@grove/api"
import { Effect, Schema } from "effect"
import type { GatewayFailure } from "../entities/Sending.ts"
import { apiErrorOf, gatewayApiError, isGatewayFailure, storedErrorAnswer } from "../http/Failures.ts"
import { QueueError } from "./CiQueueCommand.ts"
import { CiRunError } from "./CiRunCommands.ts"
import { SecretError } from "./CiSecretCommands.ts"

export const CiError = Schema.Union([QueueError, CiRunError, SecretError])
export type CiError = typeof CiError.Type

export const ciErrorResponse = (error: CiError): { status: number; body: { error: string; code: string; retryable?: boolean } } => {
  switch (error._tag) {
    case "BranchRepositoryGone":
      return { status: 404, body: { error: `repository ${error.fullName} not found`, code: "not_found" } }
    case "BranchNotFound":
      return { status: 404, body: { error: `branch '${error.branch}' not found`, code: "not_found" } }
    case "CiHeadMoved":
      return {
        status: 412,
        body: { error: `branch '${error.branch}' is no longer at the expected commit (its head is ${error.head ?? "empty"}); nothing was started`, code: "head_moved" }
      }
    case "CiTriggerKeyReused":
      return { status: 409, body: { error: "this idempotency_key was used for a different request; nothing was started", code: "idempotency_key_reused" } }
    case "CiQueueFull":
      return { status: 503, body: { error: `the CI queue is full (${error.queued} runs waiting); retry later`, code: "queue_full", retryable: true } }
    case "CiRunNotFound":
      return { status: 404, body: { error: `CI run ${error.runId} not found`, code: "not_found" } }
    case "CiRunStateInvalid":
      return {
        status: 409,
        body: { error: `CI run ${error.runId} already finished${error.conclusion === null ? "" : ` (${error.conclusion})`}`, code: "run_finished" }
      }
    case "CiSecretNotFound":
      return { status: 404, body: { error: `secret ${error.name} not found`, code: "not_found" } }
  }
}

/** A stored command error of CI, as the API would have answered it live. */
export const storedCiErrorResponse = storedErrorAnswer(CiError, ciErrorResponse)

export const ciApiError = (error: CiError) => {
  const { status, body } = ciErrorResponse(error)
  return status === 503 ? new ApiErrors.ServiceUnavailable(body) : apiErrorOf(status, body)
}

/** A CI command's failure as the API answers it. */
export const ciCommandFailure = (error: CiError | GatewayFailure) =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : ciApiError(error))
