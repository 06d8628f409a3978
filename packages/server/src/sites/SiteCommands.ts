/**
 * The site's slice of the Organization entity (key: the slug): setting and removing the
 * organization's site. Each runs in the command transaction: it locks the organization, changes the
 * `sites` row with a compare-and-set on the version it read, and writes the audit row and event.
 * Who may call them (owner or admin) is checked at the edge.
 */
import type { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Actor, Done, lockOrg, record } from "../orgs/OrganizationCommandSupport.ts"
import { SiteChanged, SiteError, SiteGone, SiteRepoUnknown } from "./SiteErrors.ts"

export const SetSitePayload = Schema.Struct({ repoName: Schema.String, sourceDir: Schema.String, ...Actor })
export const DeleteSitePayload = Schema.Struct({ ...Actor })

/** The stored settings; the edge adds the site's address. */
export const SiteState = Schema.Struct({
  organization_slug: Schema.String,
  repo_name: Schema.String,
  branch: Schema.String,
  source_dir: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String
})

interface SiteRow {
  readonly version: number
  readonly createdAt: Date
}

export const setSite = Effect.fn("Site.set")(function*(payload: typeof SetSitePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const repos = yield* sql<{ id: string; name: string }>`
    SELECT id, name FROM repositories WHERE org_id = ${org.id} AND lower(name) = lower(${payload.repoName})`
  const repo = repos[0]
  if (repo === undefined) return yield* new SiteRepoUnknown({ repo: `${org.slug}/${payload.repoName}` })
  const current = (yield* sql<SiteRow>`SELECT version, created_at AS "createdAt" FROM sites WHERE org_id = ${org.id} FOR UPDATE`)[0]
  const now = new Date()
  if (current === undefined) {
    yield* sql`INSERT INTO sites ${sql.insert({ org_id: org.id, repo_id: repo.id, source_dir: payload.sourceDir, created_at: now, updated_at: now })}`
  } else {
    const rows = yield* sql`UPDATE sites SET repo_id = ${repo.id}, source_dir = ${payload.sourceDir}, updated_at = ${now},
      version = version + 1 WHERE org_id = ${org.id} AND version = ${current.version} RETURNING org_id`
    if (rows.length === 0) return yield* new SiteChanged({ slug: org.slug })
  }
  yield* record(org, payload, {
    action: "site.set",
    event: "organization.site_set",
    details: { repo: repo.name, source_dir: payload.sourceDir }
  })
  return {
    organization_slug: org.slug,
    repo_name: repo.name,
    branch: "main",
    source_dir: payload.sourceDir,
    created_at: (current?.createdAt ?? now).toISOString(),
    updated_at: now.toISOString()
  }
})

export const deleteSite = Effect.fn("Site.delete")(function*(payload: typeof DeleteSitePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const current = (yield* sql<SiteRow>`SELECT version, created_at AS "createdAt" FROM sites WHERE org_id = ${org.id} FOR UPDATE`)[0]
  if (current === undefined) return yield* new SiteGone({ slug: org.slug })
  const rows = yield* sql`DELETE FROM sites WHERE org_id = ${org.id} AND version = ${current.version} RETURNING org_id`
  if (rows.length === 0) return yield* new SiteChanged({ slug: org.slug })
  yield* record(org, payload, { action: "site.delete", event: "organization.site_deleted" })
  return { slug: org.slug }
})

export const commands = {
  SetSite: { payload: SetSitePayload, success: SiteState, error: SiteError },
  DeleteSite: { payload: DeleteSitePayload, success: Done, error: SiteError }
} satisfies Record<string, Entity.CommandSchemas>

export const handlers: Entity.Handlers<Entity.Entity<"Organization", typeof commands>> = {
  SetSite: setSite,
  DeleteSite: deleteSite
}
