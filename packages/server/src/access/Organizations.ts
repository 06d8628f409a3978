/**
 * Organizations, their members and groups: the read side (changes are Organization entity
 * commands, `OrganizationCommands.ts`).
 */
import type { ApiOrgs, ApiSchemas } from "@grove/api"
import type { Access } from "@grove/core"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"
import { ACCESS_CACHE_TTL_MS, AccessCaches } from "../cache/AccessCaches.ts"
import { peekFound, TtlCache } from "../cache/TtlCache.ts"

export interface Organization {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly description: string | null
  readonly personal: boolean
  readonly createdAt: Date
}

/** The API's record of an organization, with the caller's role when known. */
export const toApiOrganization = (o: Organization, role?: Access.Role | undefined): ApiSchemas.Organization => ({
  slug: o.slug,
  name: o.name,
  ...(o.description === null ? {} : { description: o.description }),
  personal: o.personal,
  ...(role === undefined ? {} : { role }),
  created_at: o.createdAt.toISOString()
})

export interface OrganizationWithRole extends Organization {
  readonly role: Access.Role
}

export class Organizations extends Context.Service<Organizations, {
  readonly findBySlug: (slug: string) => Effect.Effect<Option.Option<Organization>, SqlError>
  /** `findBySlug`'s cached organization, synchronously; undefined when not cached. */
  readonly cachedBySlug: (slug: string) => Organization | undefined
  readonly roleOf: (orgId: string, principal: Access.Principal) => Effect.Effect<Access.Role | undefined, SqlError>
  /** Synchronous peeks at what `roleOf` / `creatorRole` cached (`{ role }`); undefined when not cached. */
  readonly cachedRoleOf: (orgId: string, userId: string) => { readonly value: Access.Role | undefined } | undefined
  readonly cachedCreatorRole: (orgId: string, creatorId: string) => { readonly value: Access.Role | undefined } | undefined
  /**
   * The role a service-account key holds in its organization: its creator's, as it is now (an
   * instance admin counts as owner; a creator who left holds none). A key never does more than its creator can.
   */
  readonly creatorRole: (orgId: string, creatorId: string) => Effect.Effect<Access.Role | undefined, SqlError>
  /** One page of the user's organizations by slug: at most `page.limit + 1` rows after `page.after`. */
  readonly listForUser: (userId: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<OrganizationWithRole>>, SqlError>
  /** One page of the organization's members by user name. */
  readonly listMembers: (orgId: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<ApiOrgs.Member>>, SqlError>
  /** One page of the organization's groups by slug, each with its members' names. */
  readonly listGroups: (orgId: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<ApiOrgs.Group>>, SqlError>
}>()("grove/server/orgs/Organizations") {
  static readonly layer = Layer.effect(Organizations, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // An absence is not kept: an organization created through another node is found at once.
    const bySlug = new TtlCache<string, Option.Option<Organization>>(ACCESS_CACHE_TTL_MS, { keep: Option.isSome })
    const roles = new TtlCache<string, Access.Role | undefined>(ACCESS_CACHE_TTL_MS)
    const accessCaches = yield* AccessCaches
    accessCaches.register(bySlug)
    accessCaches.register(roles)
    const columns = sql`o.id, o.slug, o.name, o.description, o.personal_user_id IS NOT NULL AS personal,
      o.created_at AS "createdAt"`
    const memberKey = (orgId: string, userId: string) => `${orgId}:${userId}`
    const creatorKey = (orgId: string, creatorId: string) => `creator:${orgId}:${creatorId}`
    return Organizations.of({
      cachedBySlug: (slug) => peekFound(bySlug, slug),
      cachedRoleOf: (orgId, userId) => roles.peek(memberKey(orgId, userId)),
      cachedCreatorRole: (orgId, creatorId) => roles.peek(creatorKey(orgId, creatorId)),
      findBySlug: (slug) =>
        bySlug.get(
          slug,
          sql<Organization>`SELECT ${columns} FROM organizations o WHERE o.slug = ${slug}`.pipe(
            Effect.map((rows) => Option.fromNullishOr(rows[0]))
          )
        ),
      roleOf: (orgId, principal) => {
        if (principal.kind !== "user") return Effect.succeed(undefined)
        return roles.get(
          memberKey(orgId, principal.userId),
          sql<{ role: Access.Role }>`SELECT role FROM memberships WHERE org_id = ${orgId} AND user_id = ${principal.userId}`
            .pipe(Effect.map((rows) => rows[0]?.role))
        )
      },
      creatorRole: (orgId, creatorId) =>
        roles.get(
          creatorKey(orgId, creatorId),
          sql<{ role: Access.Role | null; isAdmin: boolean }>`SELECT m.role, u.is_admin AS "isAdmin" FROM users u
            LEFT JOIN memberships m ON m.org_id = ${orgId} AND m.user_id = u.id WHERE u.id = ${creatorId}`
            .pipe(Effect.map((rows) => rows[0] === undefined ? undefined : rows[0].isAdmin ? "owner" : rows[0].role ?? undefined))
        ),
      listForUser: (userId, page) => {
        const key: ReadonlyArray<KeyColumn> = [{ expr: sql`o.slug` }, { expr: sql`o.id`, cast: "uuid" }]
        return sql<OrganizationWithRole>`SELECT ${columns}, m.role ${Keyset.selectKeys(sql, key)} FROM organizations o
          JOIN memberships m ON m.org_id = o.id WHERE m.user_id = ${userId} AND ${Keyset.after(sql, key, page.after)}
          ${Keyset.orderBy(sql, key)} ${Keyset.limitPlusOne(sql, page)}`.pipe(Effect.map((rows) => Keyset.keyed(rows, key)))
      },
      listMembers: (orgId, page) => {
        const key: ReadonlyArray<KeyColumn> = [{ expr: sql`u.username` }]
        return sql<{ username: string; role: Access.Role; createdAt: Date }>`SELECT u.username, m.role, m.created_at AS "createdAt"
          ${Keyset.selectKeys(sql, key)} FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.org_id = ${orgId} AND ${Keyset.after(sql, key, page.after)} ${Keyset.orderBy(sql, key)} ${Keyset.limitPlusOne(sql, page)}`
          .pipe(Effect.map((rows) =>
            Keyset.keyed(rows, key).map(({ key, row }) => ({
              key,
              row: { username: row.username, role: row.role, created_at: row.createdAt.toISOString() }
            }))
          ))
      },
      listGroups: (orgId, page) => {
        const key: ReadonlyArray<KeyColumn> = [{ expr: sql`g.slug` }]
        return sql<{ slug: string; description: string | null; createdAt: Date; members: ReadonlyArray<string> | null }>`
          SELECT g.slug, g.description, g.created_at AS "createdAt",
            (SELECT array_agg(u.username ORDER BY u.username) FROM group_members gm JOIN users u ON u.id = gm.user_id
              WHERE gm.group_id = g.id) AS members
          ${Keyset.selectKeys(sql, key)} FROM org_groups g
          WHERE g.org_id = ${orgId} AND ${Keyset.after(sql, key, page.after)} ${Keyset.orderBy(sql, key)} ${Keyset.limitPlusOne(sql, page)}`
          .pipe(Effect.map((rows) =>
            Keyset.keyed(rows, key).map(({ key, row }) => ({
              key,
              row: {
                slug: row.slug,
                ...(row.description === null ? {} : { description: row.description }),
                members: row.members ?? [],
                created_at: row.createdAt.toISOString()
              }
            }))
          ))
      }
    })
  }))
}
