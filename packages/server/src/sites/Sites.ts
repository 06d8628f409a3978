/**
 * Reading organization sites: one organization's, and the ones a caller can see. A site is
 * published when its repository is public: it is served as an anonymous reader sees `main`, so a
 * site on a private repository serves nothing and its settings are its organization's members' only.
 * Nothing here is cached: a change made through any node is read at once.
 */
import type { Access } from "@grove/core"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { ServerConfig } from "../Config.ts"
import { OrgSites } from "../web/OrgSite.ts"

export interface Site {
  readonly orgId: string
  readonly orgSlug: string
  readonly repoId: string
  readonly repoName: string
  readonly isPublic: boolean
  readonly sourceDir: string
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** Where a site is served: on its own host under the sites domain when there is one, else by path. */
export const siteUrl = (config: { readonly siteUrl: string; readonly sitesDomain?: string | undefined }, slug: string) =>
  config.sitesDomain === undefined
    ? `${config.siteUrl}/sites/${slug}/`
    : `${new URL(config.siteUrl).protocol}//${slug}.${config.sitesDomain}/`

export class Sites extends Context.Service<Sites, {
  readonly find: (slug: string) => Effect.Effect<Site | undefined, SqlError>
  readonly listVisible: (principal: Access.Principal) => Effect.Effect<ReadonlyArray<Site>, SqlError>
}>()("grove/server/sites/Sites") {
  static readonly layer = Layer.effect(Sites, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = sql`s.org_id AS "orgId", o.slug AS "orgSlug", r.id AS "repoId", r.name AS "repoName", r.is_public AS "isPublic",
      s.source_dir AS "sourceDir", s.created_at AS "createdAt", s.updated_at AS "updatedAt"
      FROM sites s JOIN organizations o ON o.id = s.org_id JOIN repositories r ON r.id = s.repo_id`
    return Sites.of({
      find: (slug) => Effect.map(sql<Site>`SELECT ${columns} WHERE o.slug = ${slug}`, (rows) => rows[0]),
      listVisible: (principal) => {
        const filter = principal.kind === "user" && principal.siteAdmin
          ? sql`true`
          : principal.kind === "user"
          ? sql`(r.is_public OR EXISTS (SELECT 1 FROM memberships m WHERE m.org_id = s.org_id AND m.user_id = ${principal.userId}))`
          : principal.kind === "service_account"
          ? sql`(r.is_public OR s.org_id = ${principal.orgId})`
          : sql`r.is_public`
        return sql<Site>`SELECT ${columns} WHERE ${filter} ORDER BY o.slug LIMIT 1000`
      }
    })
  }))

  /** The organization pages' view of a site (web/OrgSite.ts), by the same read. */
  static readonly orgSites = Layer.effect(OrgSites, Effect.gen(function*() {
    const sites = yield* Sites
    const config = yield* ServerConfig
    return OrgSites.of({
      find: (slug) =>
        Effect.map(sites.find(slug), (site) =>
          site === undefined ? undefined : { repoName: site.repoName, sourceDir: site.sourceDir, url: siteUrl(config, site.orgSlug), published: site.isPublic })
    })
  }))
}
