/**
 * Setting and deleting a repository's CI secrets are Repository entity commands: one transaction
 * with the audit row (the name, never the value). The value arrives sealed (see SecretBox).
 */
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { audit, load } from "../entities/CommandSupport.ts"
import { BranchRepositoryGone } from "../content/BranchCommands.ts"

export class CiSecretNotFound extends Schema.TaggedError<CiSecretNotFound>()("CiSecretNotFound", { name: Schema.String }) {}
export const SecretError = Schema.Union([BranchRepositoryGone, CiSecretNotFound])

export const SetSecretPayload = Schema.Struct({ name: Schema.String, sealed: Schema.String, actor: Schema.String })
export const DeleteSecretPayload = Schema.Struct({ name: Schema.String, actor: Schema.String })
export const SecretRecord = Schema.Struct({ name: Schema.String, updated_at: Schema.String, updated_by: Schema.String })

const repository = Effect.fnUntraced(function*(entityId: string) {
  const repo = yield* load(entityId)
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: entityId })
  return repo
})

const set = Effect.fn("Repository.setCiSecret")(function*(payload: typeof SetSecretPayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* repository(entityId)
  const rows = yield* sql<{ updated_at: Date | string }>`INSERT INTO ci_secrets ${
    sql.insert({ repo_id: repo.id, name: payload.name, ciphertext: payload.sealed, updated_by: payload.actor })
  } ON CONFLICT (repo_id, name) DO UPDATE SET ciphertext = EXCLUDED.ciphertext, updated_by = EXCLUDED.updated_by, updated_at = now()
    RETURNING updated_at`
  yield* audit(repo.orgId, payload.actor, "ci.secret.set", `${repo.owner}/${repo.name}`, { name: payload.name })
  return { name: payload.name, updated_at: new Date(rows[0]!.updated_at).toISOString(), updated_by: payload.actor }
})

const remove = Effect.fn("Repository.deleteCiSecret")(function*(payload: typeof DeleteSecretPayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* repository(entityId)
  const rows = yield* sql`DELETE FROM ci_secrets WHERE repo_id = ${repo.id} AND name = ${payload.name} RETURNING name`
  if (rows.length === 0) return yield* new CiSecretNotFound({ name: payload.name })
  yield* audit(repo.orgId, payload.actor, "ci.secret.delete", `${repo.owner}/${repo.name}`, { name: payload.name })
})

export const commands = {
  SetCiSecret: { payload: SetSecretPayload, success: SecretRecord, error: SecretError },
  DeleteCiSecret: { payload: DeleteSecretPayload, success: Schema.Void, error: SecretError }
} as const

export const handlers = { SetCiSecret: set, DeleteCiSecret: remove }
