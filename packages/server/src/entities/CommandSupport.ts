/**
 * What every entity command handler shares: the repository row under the
 * command's lock, audit rows and outbox events in the command's transaction.
 */
import { Outbox } from "@grove/bus"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { repositoryColumns, type RepositoryRecord } from "../access/RepositoryRecord.ts"

/** Appends a repository event (`grove.events`) in the command's transaction. */
export const emit = Effect.fnUntraced(function*(type: string, payload: Record<string, unknown>) {
  const outbox = yield* Outbox.Outbox
  yield* outbox.append({ type, v: 1, ...payload })
})

/** The repository of an entity key `owner/name`, locked for the command's transaction. */
export const load = Effect.fnUntraced(function*(entityId: string) {
  const sql = yield* SqlClient.SqlClient
  const [owner, name] = splitRepositoryKey(entityId)
  const rows = yield* sql<RepositoryRecord>`SELECT ${repositoryColumns(sql)} FROM repositories r
    JOIN organizations o ON o.id = r.org_id WHERE o.slug = ${owner} AND lower(r.name) = ${name} FOR UPDATE OF r`
  return rows[0]
})

/** `owner/name:branch` -> [`owner/name`, `branch`]; repository names never contain `:`. */
export const splitBranchKey = (entityId: string): readonly [string, string] => {
  const colon = entityId.indexOf(":")
  return [entityId.slice(0, colon), entityId.slice(colon + 1)]
}

/** `owner/name` -> [owner, name]. */
export const splitRepositoryKey = (entityId: string): readonly [string, string] => {
  const slash = entityId.indexOf("/")
  return [entityId.slice(0, slash), entityId.slice(slash + 1)]
}

export const audit = Effect.fnUntraced(function*(
  orgId: string,
  actor: string,
  action: string,
  target: string,
  details: Record<string, unknown> = {}
) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO audit_log ${sql.insert({ org_id: orgId, actor, action, target, details: JSON.stringify(details) })}`
})

