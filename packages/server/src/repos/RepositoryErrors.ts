/**
 * The one mapping from a Repository command's error to the API's answer, used
 * for replies that arrive in time and for operations read back later.
 */
import { ApiErrors } from "@grove/api"
import { storedErrorAnswer } from "../http/Failures.ts"
import { RepositoryError } from "./RepositoryCommands.ts"

export interface ErrorResponse {
  readonly status: 404 | 409
  readonly body: { readonly error: string; readonly code: string; readonly retryable?: true }
}

export const repositoryErrorResponse = (error: RepositoryError): ErrorResponse => {
  switch (error._tag) {
    case "RepositoryNameTaken":
      return { status: 409, body: { error: `a repository named ${error.fullName} already exists`, code: "name_taken" } }
    case "RepositoryGone":
      return { status: 404, body: { error: `repository ${error.fullName} not found`, code: "not_found" } }
    case "RepositoryChanged":
      return {
        status: 409,
        body: { error: `repository ${error.fullName} changed meanwhile; retry`, code: "repository_moved", retryable: true }
      }
  }
}

export const repositoryApiError = (error: RepositoryError): ApiErrors.NotFound | ApiErrors.Conflict => {
  const { status, body } = repositoryErrorResponse(error)
  return status === 404 ? new ApiErrors.NotFound(body) : new ApiErrors.Conflict(body)
}

/** A stored repository command error, as the API would have answered it live. */
export const storedRepositoryErrorResponse = storedErrorAnswer(RepositoryError, repositoryErrorResponse)
