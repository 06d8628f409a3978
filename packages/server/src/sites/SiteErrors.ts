/**
 * The site commands' typed errors (stored as command replies), and their one mapping to the API's
 * answers, for replies in time and operations read back later.
 */
import { Schema } from "effect"
import { apiErrorOf, storedErrorAnswer } from "../http/Failures.ts"
import { OrgGone } from "../orgs/OrganizationErrors.ts"

export class SiteGone extends Schema.TaggedError<SiteGone>()("SiteGone", { slug: Schema.String }) {}
export class SiteRepoUnknown extends Schema.TaggedError<SiteRepoUnknown>()("SiteRepoUnknown", { repo: Schema.String }) {}
export class SiteChanged extends Schema.TaggedError<SiteChanged>()("SiteChanged", { slug: Schema.String }) {}

export const SiteError = Schema.Union([OrgGone, SiteGone, SiteRepoUnknown, SiteChanged])
export type SiteError = typeof SiteError.Type

export const siteErrorResponse = (error: SiteError) => {
  switch (error._tag) {
    case "OrgGone":
      return { status: 404 as const, body: { error: `organization ${error.slug} not found`, code: "not_found" } }
    case "SiteGone":
      return { status: 404 as const, body: { error: `organization ${error.slug} has no site`, code: "not_found" } }
    case "SiteRepoUnknown":
      return { status: 404 as const, body: { error: `repository ${error.repo} not found in the organization`, code: "repo_not_found" } }
    case "SiteChanged":
      return { status: 409 as const, body: { error: `the site of ${error.slug} changed meanwhile; retry`, code: "site_changed", retryable: true as const } }
  }
}

export const siteApiError = (error: SiteError) => {
  const { status, body } = siteErrorResponse(error)
  return apiErrorOf(status, body)
}

/** A stored site command error, as the API would have answered it live. */
export const storedSiteErrorResponse = storedErrorAnswer(SiteError, siteErrorResponse)
