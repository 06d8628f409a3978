/**
 * The Repository entity's commands (key: `owner/name`). Each handler runs
 * inside the entity runtime's command transaction, after the epoch fence and
 * the inbox check; it changes rows with a compare-and-set on `version` and
 * appends outbox events. Replies are plain schemas so the inbox can store them.
 */
import { ApiSchemas } from "@grove/api"
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { repositoryColumns, type RepositoryRecord, RepositoryWritten, repositoryWritten, toApiRepository } from "../access/RepositoryRecord.ts"
import { audit, emit, load, splitRepositoryKey } from "../entities/CommandSupport.ts"

export class RepositoryNameTaken extends Schema.TaggedError<RepositoryNameTaken>()("RepositoryNameTaken", {
  fullName: Schema.String
}) {}
export class RepositoryGone extends Schema.TaggedError<RepositoryGone>()("RepositoryGone", {
  fullName: Schema.String
}) {}
/** The row changed under the command (a concurrent writer on another key, e.g. a transfer into this name). */
export class RepositoryChanged extends Schema.TaggedError<RepositoryChanged>()("RepositoryChanged", {
  fullName: Schema.String
}) {}

export const RepositoryError = Schema.Union([RepositoryNameTaken, RepositoryGone, RepositoryChanged])
export type RepositoryError = typeof RepositoryError.Type

const Actor = { actor: Schema.String }

export const CreatePayload = Schema.Struct({
  orgId: Schema.String,
  owner: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  isPublic: Schema.Boolean,
  ...Actor
})
export const DeletePayload = Schema.Struct({ ...Actor })
export const SetVisibilityPayload = Schema.Struct({ isPublic: Schema.Boolean, ...Actor })
export const TransferPayload = Schema.Struct({ toOrgId: Schema.String, toOwner: Schema.String, ...Actor })


const isUniqueViolation = (error: unknown) => error instanceof SqlError && error.reason._tag === "UniqueViolation"

export const create = Effect.fn("Repository.create")(function*(
  payload: typeof CreatePayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const fullName = `${payload.owner}/${payload.name}`
  if ((yield* load(entityId)) !== undefined) return yield* new RepositoryNameTaken({ fullName })
  const id = randomUUID()
  // A savepoint keeps the command transaction usable when the unique index refuses the row.
  const inserted = yield* sql.withTransaction(
    sql`INSERT INTO repositories ${
      sql.insert({
        id,
        org_id: payload.orgId,
        name: payload.name,
        description: payload.description,
        is_public: payload.isPublic
      })
    }`
  ).pipe(
    Effect.as(true),
    Effect.catch((error) => isUniqueViolation(error) ? Effect.succeed(false) : Effect.fail(error))
  )
  if (!inserted) return yield* new RepositoryNameTaken({ fullName })
  // Every repository has `main`; it gets a head from its first merge.
  yield* sql`INSERT INTO branches ${
    sql.insert({ repo_id: id, name: "main", status: "open", created_by: payload.actor, created_at: new Date().toISOString().replace("Z", "+00:00") })
  }`
  const record = (yield* load(entityId))!
  yield* audit(payload.orgId, payload.actor, "repo.create", fullName, { public: payload.isPublic })
  yield* emit("repository.created", { repository_id: id, owner: payload.owner, repo: payload.name, actor: payload.actor })
  return toApiRepository(record)
})

export const remove = Effect.fn("Repository.delete")(function*(
  payload: typeof DeletePayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const current = yield* load(entityId)
  if (current === undefined) return yield* new RepositoryGone({ fullName: entityId })
  const rows = yield* sql`DELETE FROM repositories WHERE id = ${current.id} AND version = ${current.version} RETURNING id`
  if (rows.length === 0) return yield* new RepositoryChanged({ fullName: entityId })
  const fullName = `${current.owner}/${current.name}`
  yield* audit(current.orgId, payload.actor, "repo.delete", fullName)
  yield* emit("repository.deleted", { repository_id: current.id, owner: current.owner, repo: current.name, actor: payload.actor })
  return toApiRepository(current)
})

/**
 * One statement: the repository locked by its entity key, the UPDATE when the visibility changes and its audit
 * row (each write waits on the one before it); the event goes with the reply. Its note: the row as written (or
 * as found, `unchanged`), for the sending node's cache.
 */
export const setVisibility = Effect.fn("Repository.setVisibility")(function*(
  payload: typeof SetVisibilityPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const [owner, name] = splitRepositoryKey(entityId)
  const rows = yield* sql<RepositoryRecord & { readonly written: boolean }>`WITH
    current AS (SELECT ${repositoryColumns(sql)} FROM repositories r JOIN organizations o ON o.id = r.org_id
      WHERE o.slug = ${owner} AND lower(r.name) = ${name} FOR UPDATE OF r),
    updated AS (UPDATE repositories r SET is_public = ${payload.isPublic}::boolean, updated_at = now(), version = r.version + 1
      FROM current c WHERE r.id = c.id AND c."isPublic" <> ${payload.isPublic}::boolean RETURNING r.updated_at, r.version),
    audited AS (INSERT INTO audit_log (org_id, actor, action, target, details)
      SELECT c."orgId", ${payload.actor}::text, 'repo.visibility', c.owner || '/' || c.name, ${JSON.stringify({ public: payload.isPublic })}::jsonb
      FROM current c WHERE EXISTS (SELECT 1 FROM updated) RETURNING 1)
    SELECT c.id, c."orgId", c.owner, c.name, c.description, ${payload.isPublic}::boolean AS "isPublic", c.head, c."createdAt",
      coalesce(u.updated_at, c."updatedAt") AS "updatedAt", coalesce(u.version, c.version) AS version, u.version IS NOT NULL AS written
    FROM current c LEFT JOIN updated u ON true`
  const row = rows[0]
  if (row === undefined) return yield* new RepositoryGone({ fullName: entityId })
  const { written, ...record } = row
  // Nothing written: the note says so, and the sending node keeps its record if it is of this version.
  if (!written) return Entity.noted(toApiRepository(record), { ...repositoryWritten(record), unchanged: true })
  yield* emit("repository.visibility_changed", {
    repository_id: record.id,
    owner: record.owner,
    repo: record.name,
    is_public: payload.isPublic,
    actor: payload.actor
  })
  return Entity.noted(toApiRepository(record), repositoryWritten(record))
})

export const transfer = Effect.fn("Repository.transfer")(function*(
  payload: typeof TransferPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const current = yield* load(entityId)
  if (current === undefined) return yield* new RepositoryGone({ fullName: entityId })
  if (current.orgId === payload.toOrgId) return toApiRepository(current)
  const target = `${payload.toOwner}/${current.name}`
  const moved = yield* sql.withTransaction(
    sql`UPDATE repositories SET org_id = ${payload.toOrgId}, updated_at = now(), version = version + 1
      WHERE id = ${current.id} AND version = ${current.version} RETURNING id`
  ).pipe(Effect.catch((error) => isUniqueViolation(error) ? Effect.succeed(undefined) : Effect.fail(error)))
  if (moved === undefined) return yield* new RepositoryNameTaken({ fullName: target })
  if (moved.length === 0) return yield* new RepositoryChanged({ fullName: entityId })
  const from = `${current.owner}/${current.name}`
  yield* audit(current.orgId, payload.actor, "repo.transfer.out", from, { to: target })
  yield* audit(payload.toOrgId, payload.actor, "repo.transfer.in", target, { from })
  yield* emit("repository.transferred", {
    repository_id: current.id,
    owner: payload.toOwner,
    repo: current.name,
    from_owner: current.owner,
    actor: payload.actor
  })
  const rows = yield* sql<RepositoryRecord>`SELECT ${repositoryColumns(sql)} FROM repositories r
    JOIN organizations o ON o.id = r.org_id WHERE r.id = ${current.id}`
  return toApiRepository(rows[0]!)
})

/** The repository's own slice of the Repository entity; `Entities.ts` composes the entity from the slices. */
export const commands = {
  Create: { payload: CreatePayload, success: ApiSchemas.Repository, error: RepositoryError },
  Delete: { payload: DeletePayload, success: ApiSchemas.Repository, error: RepositoryError },
  SetVisibility: { payload: SetVisibilityPayload, success: ApiSchemas.Repository, error: RepositoryError, note: RepositoryWritten },
  Transfer: { payload: TransferPayload, success: ApiSchemas.Repository, error: RepositoryError }
} as const

export const handlers = { Create: create, Delete: remove, SetVisibility: setVisibility, Transfer: transfer }
