/**
 * Repository reads. They go straight to the database on any node; writes go
 * through the Repository entity.
 */
import type { Access } from "@grove/core"
import type { Entity } from "@grove/bus"
import { Context, Effect, Exit, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { ACCESS_CACHE_TTL_MS, AccessCaches } from "../cache/AccessCaches.ts"
import { peekFound, TtlCache } from "../cache/TtlCache.ts"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"
import { repositoryColumns, type RepositoryRecord, repositoryKey, type RepositoryWritten } from "./RepositoryRecord.ts"

export type RepositorySort = "name" | "updated" | "created"

/** What a write set in a repository's row: the fields it changed, and the version and updated_at it left. */
export type LandedRecord = Partial<Pick<RepositoryRecord, "head" | "isPublic">> & Pick<RepositoryRecord, "version" | "updatedAt">

export class Repositories extends Context.Service<Repositories, {
  readonly findByFullName: (owner: string, name: string) => Effect.Effect<Option.Option<RepositoryRecord>, SqlError>
  /** `findByFullName`'s cached record, synchronously; undefined when not cached (an absence is never cached). */
  readonly cachedByFullName: (owner: string, name: string) => RepositoryRecord | undefined
  /** Forgets cached reads of `owner/name` (after a write to it). */
  readonly invalidate: (owner: string, name: string) => void
  /** How many repository changes this node has been notified of: taken before a write, for `landed`. */
  readonly changesSeen: () => number
  /**
   * After a write through this node changed `before` (`after`: the fields it set, its version and updated_at):
   * caches the record as written, without a read, when it is exact: its version is the next after `before`'s
   * (nothing else changed the row in between; every change bumps it) and at most one change (the write's own)
   * was notified since `since` (`changesSeen` before the write), so none came after it. Otherwise forgets the
   * record, as `invalidate`.
   */
  readonly landed: (before: RepositoryRecord, after: LandedRecord, since: number) => Effect.Effect<void>
  readonly findById: (id: string) => Effect.Effect<Option.Option<RepositoryRecord>, SqlError>
  /**
   * One page of the repositories the principal can read (public ones, and all in organizations
   * they belong to), in `sort`'s order: at most `page.limit + 1` rows after `page.after`.
   */
  readonly listReadable: (
    principal: Access.Principal,
    limits: Access.TokenLimits,
    sort: RepositorySort,
    page: PageRequest,
    /** Only this organization's (its overview page). */
    orgId?: string
  ) => Effect.Effect<ReadonlyArray<Keyed<RepositoryRecord>>, SqlError>
  /** Storage accounted to the repository (maintained by pushes). */
  readonly usage: (id: string) => Effect.Effect<Option.Option<{ readonly sizeBytes: number; readonly objects: number }>, SqlError>
}>()("grove/server/repos/Repositories") {
  static readonly layer = Layer.effect(Repositories, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = repositoryColumns(sql)
    // Reads by name, forgotten when the database notifies a change of the row (its head and updated_at
    // included), wherever it was made. An absence is not kept: nothing notifies an insert.
    const byName = new TtlCache<string, Option.Option<RepositoryRecord>>(ACCESS_CACHE_TTL_MS, { keep: Option.isSome })
    const accessCaches = yield* AccessCaches
    let changes = 0
    accessCaches.register({
      invalidateAll: () => {
        changes++
        byName.invalidateAll()
      },
      setLive: (live) => {
        changes++
        byName.setLive(live)
      },
      invalidateRepository: (id) => {
        changes++
        byName.invalidateWhere((found) => Option.isSome(found) && found.value.id === id)
      }
    })
    const keys = (sort: RepositorySort): ReadonlyArray<KeyColumn> =>
      sort === "name"
        ? [{ expr: sql`o.slug` }, { expr: sql`lower(r.name)` }, { expr: sql`r.id`, cast: "uuid" }]
        : [
          sort === "updated"
            ? { expr: sql`r.updated_at`, descending: true, cast: "timestamptz", read: sql`r.updated_at::text` }
            : { expr: sql`r.created_at`, descending: true, cast: "timestamptz", read: sql`r.created_at::text` },
          { expr: sql`r.id`, cast: "uuid" }
        ]
    return Repositories.of({
      findByFullName: (owner, name) =>
        byName.get(
          repositoryKey(owner, name),
          sql<RepositoryRecord>`SELECT ${columns} FROM repositories r JOIN organizations o ON o.id = r.org_id
            WHERE o.slug = ${owner} AND lower(r.name) = lower(${name})`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])))
        ),
      cachedByFullName: (owner, name) => peekFound(byName, repositoryKey(owner, name)),
      invalidate: (owner, name) => byName.invalidate(repositoryKey(owner, name)),
      changesSeen: () => changes,
      landed: (before, after, since) => {
        const key = repositoryKey(before.owner, before.name)
        if (after.version !== before.version + 1 || changes - since > 1) return Effect.sync(() => byName.invalidate(key))
        const record: RepositoryRecord = { ...before, ...after }
        // What is cached (the handler's own read from before the write) or still loading is forgotten first, as any
        // write through this node does: in cluster mode the write's own notification comes later (LISTEN), and until
        // then the old record would be served. Then the record as it landed is cached.
        return Effect.sync(() => byName.invalidate(key)).pipe(
          Effect.andThen(byName.get(key, Effect.succeed(Option.some(record)))),
          Effect.ignore
        )
      },
      findById: (id) =>
        sql<RepositoryRecord>`SELECT ${columns} FROM repositories r JOIN organizations o ON o.id = r.org_id
          WHERE r.id = ${id}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0]))),
      usage: (id) =>
        sql<{ sizeBytes: string; objects: string }>`SELECT size_bytes::text AS "sizeBytes", object_count::text AS objects
          FROM repositories WHERE id = ${id}`.pipe(
          Effect.map((rows) =>
            Option.map(Option.fromNullishOr(rows[0]), (r) => ({ sizeBytes: Number(r.sizeBytes), objects: Number(r.objects) }))
          )
        ),
      listReadable: (principal, limits, sort, page, orgId) => {
        const repoLimit = limits.kind === "personal" ? limits.repoId : undefined
        const filter = repoLimit !== undefined
          ? sql`r.id = ${repoLimit}`
          : principal.kind === "user" && principal.siteAdmin
          ? sql`true`
          : principal.kind === "user"
          ? sql`(r.is_public OR EXISTS (SELECT 1 FROM memberships m WHERE m.org_id = r.org_id AND m.user_id = ${principal.userId}))`
          : principal.kind === "service_account" && limits.kind === "service" && limits.creatorId !== undefined
          // A service-account key: its own organization's, as far as its creator may still see them.
          ? sql`(r.is_public OR (r.org_id = ${principal.orgId} AND EXISTS (SELECT 1 FROM users u WHERE u.id = ${limits.creatorId}
              AND (u.is_admin OR EXISTS (SELECT 1 FROM memberships m WHERE m.org_id = r.org_id AND m.user_id = u.id)))))`
          : sql`r.is_public`
        const key = keys(sort)
        return sql<RepositoryRecord>`SELECT ${columns} ${Keyset.selectKeys(sql, key)}
          FROM repositories r JOIN organizations o ON o.id = r.org_id
          WHERE ${filter} AND ${orgId === undefined ? sql`true` : sql`r.org_id = ${orgId}`} AND ${Keyset.after(sql, key, page.after)}
          ${Keyset.orderBy(sql, key)} ${Keyset.limitPlusOne(sql, page)}`.pipe(Effect.map((rows) => Keyset.keyed(rows, key)))
      }
    })
  }))
}

/**
 * After a Repository command sent from this node for `before` (its `changed` fields): the record as the
 * command's note says it landed (`landed`), or forgotten when there is none (a replayed or failed command).
 * A command that wrote nothing (`unchanged`) leaves the cache as it is when the row is still `before`'s version
 * (every change bumps it), so the next request does not read the row again. `since`: `changesSeen()` taken
 * before the send.
 */
export const afterRepositoryWrite = (
  repositories: Repositories["Service"],
  before: RepositoryRecord,
  changed: Partial<Pick<RepositoryRecord, "head" | "isPublic">>,
  since: number
) =>
<A, E>(exit: Exit.Exit<Entity.Replied<A, RepositoryWritten>, E>): Effect.Effect<void> => {
  const note = Exit.isSuccess(exit) ? exit.value.note : undefined
  if (note === undefined || note.unchanged === true && note.version !== before.version) {
    return Effect.sync(() => repositories.invalidate(before.owner, before.name))
  }
  return note.unchanged === true
    ? Effect.void
    : repositories.landed(before, { ...changed, version: note.version, updatedAt: new Date(note.updated_at) }, since)
}
