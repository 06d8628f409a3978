/**
 * An organization's site as its pages show it. The service is declared here and provided by sites/
 * (`Sites.orgSites`): the organization pages live in orgs/, which sites/ builds on, so orgs/ may not
 * import sites/ itself.
 */
import { Context, type Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"

export interface OrgSiteView {
  readonly repoName: string
  /** "" for the repository's root. */
  readonly sourceDir: string
  /** Where it is served. */
  readonly url: string
  /** Served while its repository is public. */
  readonly published: boolean
}

export class OrgSites extends Context.Service<OrgSites, {
  readonly find: (slug: string) => Effect.Effect<OrgSiteView | undefined, SqlError>
}>()("grove/server/web/OrgSites") {}
