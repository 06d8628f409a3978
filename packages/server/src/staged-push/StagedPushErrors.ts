/** How staged pushes and blob proofs fail, as the API answers it (live, and for operations read back later). */
import { ApiErrors } from "@grove/api"
import { Effect } from "effect"
import type { GatewayFailure } from "../entities/Sending.ts"
import { branchErrorResponse } from "../content/BranchErrors.ts"
import { apiErrorOf, gatewayApiError, isGatewayFailure, storedErrorAnswer } from "../http/Failures.ts"
import type { ProofRefused } from "./BlobProofs.ts"
import { FinalizeError } from "./FinalizeStageCommand.ts"

export const stageErrorResponse = (error: FinalizeError): { readonly status: number; readonly body: { error: string; code: string } } => {
  switch (error._tag) {
    case "StageMissing":
      return { status: 400, body: { error: `staged session ${error.stageId} is missing or expired`, code: "stage_missing" } }
    case "StageInvalid":
      return { status: 400, body: { error: error.message, code: error.code } }
    case "StageAborted":
      return { status: 409, body: { error: "staged session was aborted and cannot be reused", code: "stage_aborted" } }
    default:
      return branchErrorResponse(error)
  }
}

/** A stored FinalizeStage failure, as the API would have answered it live. */
export const storedStageErrorResponse = storedErrorAnswer(FinalizeError, stageErrorResponse)

export const finalizeFailure = (error: FinalizeError | GatewayFailure) => {
  if (isGatewayFailure(error)) return Effect.fail(gatewayApiError(error))
  const { status, body } = stageErrorResponse(error)
  return Effect.fail(apiErrorOf(status, body))
}

export const proofFailure = (error: ProofRefused) =>
  Effect.fail(
    error.status === 429
      ? new ApiErrors.TooManyRequests({ error: error.message, code: error.code })
      : apiErrorOf(error.status, { error: error.message, code: error.code })
  )

export const tooManyStages = (limit: number) =>
  new ApiErrors.TooManyRequests({
    error: `you have ${limit} staged pushes open in this repository; finish or abort one (GET push/staged-v1 lists them), or wait for one to expire`,
    code: "too_many_stages"
  })
