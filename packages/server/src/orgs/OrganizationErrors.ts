/**
 * The Organization entity's typed errors (stored as command replies), and the one mapping from
 * them to the API's answers, for replies that arrive in time and operations read back later.
 */
import { Schema } from "effect"
import { apiErrorOf, storedErrorAnswer } from "../http/Failures.ts"

export class OrgGone extends Schema.TaggedError<OrgGone>()("OrgGone", { slug: Schema.String }) {}
export class OrgNameTaken extends Schema.TaggedError<OrgNameTaken>()("OrgNameTaken", { slug: Schema.String }) {}
export class OrgChanged extends Schema.TaggedError<OrgChanged>()("OrgChanged", { slug: Schema.String }) {}
export class OrgNotEmpty extends Schema.TaggedError<OrgNotEmpty>()("OrgNotEmpty", {
  slug: Schema.String,
  repositories: Schema.Array(Schema.String)
}) {}
export class PersonalOrganization extends Schema.TaggedError<PersonalOrganization>()("PersonalOrganization", {
  slug: Schema.String,
  what: Schema.String
}) {}
export class UserUnknown extends Schema.TaggedError<UserUnknown>()("UserUnknown", { username: Schema.String }) {}
export class AlreadyMember extends Schema.TaggedError<AlreadyMember>()("AlreadyMember", { username: Schema.String }) {}
export class NotMember extends Schema.TaggedError<NotMember>()("NotMember", { username: Schema.String }) {}
export class LastOwner extends Schema.TaggedError<LastOwner>()("LastOwner", { slug: Schema.String }) {}
export class OwnerRequired extends Schema.TaggedError<OwnerRequired>()("OwnerRequired", {}) {}
export class GroupTaken extends Schema.TaggedError<GroupTaken>()("GroupTaken", { group: Schema.String }) {}
export class GroupGone extends Schema.TaggedError<GroupGone>()("GroupGone", { group: Schema.String }) {}
export class AlreadyInGroup extends Schema.TaggedError<AlreadyInGroup>()("AlreadyInGroup", {
  group: Schema.String,
  username: Schema.String
}) {}
export class NotInGroup extends Schema.TaggedError<NotInGroup>()("NotInGroup", {
  group: Schema.String,
  username: Schema.String
}) {}

export const OrganizationError = Schema.Union([
  OrgGone,
  OrgNameTaken,
  OrgChanged,
  OrgNotEmpty,
  PersonalOrganization,
  UserUnknown,
  AlreadyMember,
  NotMember,
  LastOwner,
  OwnerRequired,
  GroupTaken,
  GroupGone,
  AlreadyInGroup,
  NotInGroup
])
export type OrganizationError = typeof OrganizationError.Type

export interface ErrorResponse {
  readonly status: 400 | 403 | 404 | 409
  readonly body: { readonly error: string; readonly code: string; readonly retryable?: true; readonly repositories?: ReadonlyArray<string> }
}

export const organizationErrorResponse = (error: OrganizationError): ErrorResponse => {
  switch (error._tag) {
    case "OrgGone":
      return { status: 404, body: { error: `organization ${error.slug} not found`, code: "not_found" } }
    case "OrgNameTaken":
      return { status: 409, body: { error: `the name ${error.slug} is already taken`, code: "name_taken" } }
    case "OrgChanged":
      return { status: 409, body: { error: `organization ${error.slug} changed meanwhile; retry`, code: "org_changed", retryable: true } }
    case "OrgNotEmpty":
      return {
        status: 409,
        body: {
          error: `organization ${error.slug} still has repositories (${error.repositories.join(", ")}); move or delete them first`,
          code: "org_not_empty",
          repositories: error.repositories
        }
      }
    case "PersonalOrganization":
      return { status: 409, body: { error: `${error.slug} is a personal organization: ${error.what}`, code: "personal_organization" } }
    case "UserUnknown":
      return { status: 404, body: { error: `user ${error.username} not found`, code: "user_not_found" } }
    case "AlreadyMember":
      return { status: 409, body: { error: `${error.username} is already a member`, code: "already_member" } }
    case "NotMember":
      return { status: 404, body: { error: `${error.username} is not a member of the organization`, code: "not_member" } }
    case "LastOwner":
      return {
        status: 409,
        body: { error: `the last owner of ${error.slug} cannot be removed or demoted; make another member owner first`, code: "last_owner" }
      }
    case "OwnerRequired":
      return { status: 403, body: { error: "only an owner may grant, change or remove the owner role", code: "owner_required" } }
    case "GroupTaken":
      return { status: 409, body: { error: `a group named ${error.group} already exists`, code: "name_taken" } }
    case "GroupGone":
      return { status: 404, body: { error: `group ${error.group} not found`, code: "not_found" } }
    case "AlreadyInGroup":
      return { status: 409, body: { error: `${error.username} is already in group ${error.group}`, code: "already_member" } }
    case "NotInGroup":
      return { status: 404, body: { error: `${error.username} is not in group ${error.group}`, code: "not_member" } }
  }
}

export const organizationApiError = (error: OrganizationError) => {
  const { status, body } = organizationErrorResponse(error)
  return apiErrorOf(status, body)
}

/** A stored organization command error, as the API would have answered it live. */
export const storedOrganizationErrorResponse = storedErrorAnswer(OrganizationError, organizationErrorResponse)
