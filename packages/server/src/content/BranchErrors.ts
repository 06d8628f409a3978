/**
 * The one mapping from a Branch command's error (and a push's rejection) to
 * the API's answer, used for replies that arrive in time and for operations
 * read back later.
 */
import { BranchError } from "./BranchCommands.ts"
import { apiErrorOf, type StatusApiError, storedErrorAnswer } from "../http/Failures.ts"

export interface BranchErrorResponse {
  readonly status: 400 | 403 | 404 | 409 | 413
  readonly body: { readonly error: string; readonly code: string; readonly retryable?: boolean }
}

export const branchErrorResponse = (error: BranchError): BranchErrorResponse => {
  switch (error._tag) {
    case "BranchRepositoryGone":
      return { status: 404, body: { error: `repository ${error.fullName} not found`, code: "not_found" } }
    case "BranchNotFound":
      return { status: 404, body: { error: `branch '${error.branch}' not found`, code: "branch_not_found" } }
    case "BranchExists":
      return { status: 409, body: { error: `branch '${error.branch}' already exists`, code: "branch_exists" } }
    case "BranchStateInvalid":
      return { status: 400, body: { error: error.message, code: error.code } }
    case "MainProtected":
      return {
        status: 403,
        body: { error: "main changes only by merge or revert: push a branch and merge it", code: "main_protected" }
      }
    case "QuotaExceeded":
      return {
        status: 413,
        body: {
          error: `organization ${error.owner} would exceed its storage quota: ${error.usedBytes} of ${error.quotaBytes} bytes used, ` +
            `this push needs ${error.neededBytes} more; nothing was published`,
          code: "quota_exceeded"
        }
      }
    case "ObjectsMissing":
      // Nothing was published; pushing again uploads what is missing (blobs/check and chunks/check report it).
      return { status: 409, body: { error: `${error.message}; nothing was published, push again`, code: "objects_missing", retryable: true } }
    case "ParentUnpublished":
      return {
        status: 400,
        body: { error: `parent commit ${error.commit} is not published in this repository`, code: "missing_parent" }
      }
  }
}

export type BranchApiError = StatusApiError

export const branchApiError = (error: BranchError): BranchApiError => {
  const { status, body } = branchErrorResponse(error)
  return apiErrorOf(status, body)
}

/** A stored branch command error, as the API would have answered it live. */
export const storedBranchErrorResponse = storedErrorAnswer(BranchError, branchErrorResponse)
