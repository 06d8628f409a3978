/**
 * Merge answers (spec: merge responses): 409 `main_moved` / `branch_moved` (retryable, nothing
 * merged), 409 with `conflict_paths`, 400 for a branch already merged or closed, 404 for a missing one.
 */
import { MergeError } from "./MergeCommand.ts"
import type { LandingRefused } from "./Landing.ts"
import { branchErrorResponse } from "../content/BranchErrors.ts"
import { apiErrorOf, storedErrorAnswer } from "../http/Failures.ts"

export interface MergeErrorResponse {
  readonly status: number
  readonly body: { readonly error: string; readonly code: string; readonly retryable?: boolean; readonly conflict_paths?: ReadonlyArray<string> }
}

export const mergeErrorResponse = (error: MergeError | LandingRefused): MergeErrorResponse => {
  switch (error._tag) {
    case "MainMoved":
      return { status: 409, body: { error: "main changed during the merge; nothing was merged, retry", code: "main_moved", retryable: true } }
    case "BranchMoved":
      return {
        status: 409,
        body: { error: `branch '${error.branch}' received new commits during the merge; nothing was merged, retry`, code: "branch_moved", retryable: true }
      }
    case "LandingRefused":
      return {
        status: error.status,
        body: { error: error.message, code: error.code, ...(error.conflictPaths === undefined ? {} : { conflict_paths: error.conflictPaths }) }
      }
    default:
      return branchErrorResponse(error)
  }
}

export const mergeApiError = (error: MergeError | LandingRefused) => {
  const { status, body } = mergeErrorResponse(error)
  return apiErrorOf(status, body)
}

/** A stored merge command error, as the API would have answered it live. */
export const storedMergeErrorResponse = storedErrorAnswer(MergeError, mergeErrorResponse)
