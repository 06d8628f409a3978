/**
 * Organizations and memberships: reads, and creation (one transaction with the
 * creator's owner membership and an audit row).
 */
import type { Access } from "@grove/core"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"
import { AccessCaches } from "../cache/AccessCaches.ts"
import { TtlCache } from "../cache/TtlCache.ts"
import { NameTaken } from "../identity/IdentityErrors.ts"

/** Organization and role reads are reused this long; changes through this node invalidate at once. */
const CACHE_TTL_MS = 2_000

export interface Organization {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly description: string | null
  readonly personal: boolean
  readonly createdAt: Date
}

export interface OrganizationWithRole extends Organization {
  readonly role: Access.Role
}

export class Organizations extends Context.Service<Organizations, {
  readonly findBySlug: (slug: string) => Effect.Effect<Option.Option<Organization>, SqlError>
  readonly roleOf: (orgId: string, principal: Access.Principal) => Effect.Effect<Access.Role | undefined, SqlError>
  /** One page of the user's organizations by slug: at most `page.limit + 1` rows after `page.after`. */
  readonly listForUser: (userId: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<OrganizationWithRole>>, SqlError>
  readonly create: (userId: string, actor: string, input: {
    readonly slug: string
    readonly name: string
    readonly description?: string | undefined
  }) => Effect.Effect<OrganizationWithRole, NameTaken | SqlError>
}>()("grove/server/orgs/Organizations") {
  static readonly layer = Layer.effect(Organizations, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bySlug = new TtlCache<string, Option.Option<Organization>>(CACHE_TTL_MS)
    const roles = new TtlCache<string, Access.Role | undefined>(CACHE_TTL_MS)
    const accessCaches = yield* AccessCaches
    accessCaches.register(bySlug)
    accessCaches.register(roles)
    const columns = sql`o.id, o.slug, o.name, o.description, o.personal_user_id IS NOT NULL AS personal,
      o.created_at AS "createdAt"`
    return Organizations.of({
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
          `${orgId}:${principal.userId}`,
          sql<{ role: Access.Role }>`SELECT role FROM memberships WHERE org_id = ${orgId} AND user_id = ${principal.userId}`
            .pipe(Effect.map((rows) => rows[0]?.role))
        )
      },
      listForUser: (userId, page) => {
        const key: ReadonlyArray<KeyColumn> = [{ expr: sql`o.slug` }, { expr: sql`o.id`, cast: "uuid" }]
        return sql<OrganizationWithRole>`SELECT ${columns}, m.role ${Keyset.selectKeys(sql, key)} FROM organizations o
          JOIN memberships m ON m.org_id = o.id WHERE m.user_id = ${userId} AND ${Keyset.after(sql, key, page.after)}
          ${Keyset.orderBy(sql, key)} ${Keyset.limitPlusOne(sql, page)}`.pipe(Effect.map((rows) => Keyset.keyed(rows, key)))
      },
      create: Effect.fn("Organizations.create")(function*(userId, actor, input) {
        const id = randomUUID()
        return yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql<Organization>`INSERT INTO organizations ${
            sql.insert({ id, slug: input.slug, name: input.name, description: input.description ?? null })
          } RETURNING id, slug, name, description, false AS personal, created_at AS "createdAt"`
          yield* sql`INSERT INTO memberships ${sql.insert({ org_id: id, user_id: userId, role: "owner" })}`
          yield* sql`INSERT INTO audit_log ${sql.insert({ org_id: id, actor, action: "org.create", target: input.slug })}`
          return { ...rows[0]!, role: "owner" as const }
        })).pipe(
          Effect.tap(() => Effect.sync(() => bySlug.invalidate(input.slug))),
          Effect.catchTag("SqlError", (error): Effect.Effect<never, NameTaken | SqlError> =>
            error.reason._tag === "UniqueViolation" ? Effect.fail(new NameTaken({ name: input.slug })) : Effect.fail(error))
        )
      })
    })
  }))
}
