/**
 * The service-account commands' typed errors (stored as command replies), and the one mapping from
 * them to the API's answers.
 */
import { Schema } from "effect"
import { apiErrorOf, storedErrorAnswer } from "../http/Failures.ts"
import { OrgGone } from "../orgs/OrganizationErrors.ts"

export class AccountGone extends Schema.TaggedError<AccountGone>()("AccountGone", { name: Schema.String }) {}
export class AccountNameTaken extends Schema.TaggedError<AccountNameTaken>()("AccountNameTaken", { name: Schema.String }) {}
export class AccountKeyGone extends Schema.TaggedError<AccountKeyGone>()("AccountKeyGone", { keyId: Schema.String }) {}
export class PersonalKeyGone extends Schema.TaggedError<PersonalKeyGone>()("PersonalKeyGone", { keyId: Schema.String }) {}

/** The organization may go while a command waits (OrgGone). */
export const ServiceAccountError = Schema.Union([AccountGone, AccountNameTaken, AccountKeyGone, PersonalKeyGone, OrgGone])
export type ServiceAccountError = typeof ServiceAccountError.Type

export const serviceAccountErrorResponse = (error: ServiceAccountError) => {
  switch (error._tag) {
    case "OrgGone":
      return { status: 404, body: { error: `organization ${error.slug} not found`, code: "not_found" } } as const
    case "AccountGone":
      return { status: 404, body: { error: `service account ${error.name} not found`, code: "not_found" } } as const
    case "AccountNameTaken":
      return { status: 409, body: { error: `a service account named ${error.name} already exists`, code: "name_taken" } } as const
    case "AccountKeyGone":
    case "PersonalKeyGone":
      return { status: 404, body: { error: "key not found", code: "not_found" } } as const
  }
}

export const serviceAccountApiError = (error: ServiceAccountError) => {
  const { status, body } = serviceAccountErrorResponse(error)
  return apiErrorOf(status, body)
}

/** A stored service-account or personal-key command error, as the API would have answered it live. */
export const storedServiceAccountErrorResponse = storedErrorAnswer(ServiceAccountError, serviceAccountErrorResponse)
