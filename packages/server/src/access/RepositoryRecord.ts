/** A repository as stored, with its owner's slug; shared by reads and the Repository entity. */
import type { ApiSchemas } from "@grove/api"
import { Schema } from "effect"
import type { SqlClient } from "effect/sql"

export interface RepositoryRecord {
  readonly id: string
  readonly orgId: string
  readonly owner: string
  readonly name: string
  readonly description: string | null
  readonly isPublic: boolean
  readonly head: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly version: number
}

/**
 * The repository row as a command left it (its version and updated_at; the command knows the fields it set): the
 * note a Repository command gives the node that sent it (`Entity.noted`), which caches the record without a read
 * (`Repositories.landed`). Never part of an answer or a stored reply. `unchanged`: the command wrote nothing (the
 * row as it found it), so the sender's record of the same version is still exact (`afterRepositoryWrite`).
 */
export const RepositoryWritten = Schema.Struct({
  version: Schema.Number,
  updated_at: Schema.String,
  unchanged: Schema.optionalKey(Schema.Boolean)
})
export type RepositoryWritten = typeof RepositoryWritten.Type

/** `RepositoryWritten` of a row as read back (`RETURNING`). */
export const repositoryWritten = (row: { readonly version: number; readonly updatedAt: Date }): RepositoryWritten => ({
  version: row.version,
  updated_at: row.updatedAt.toISOString()
})

/** The select list every repository read uses (`r` = repositories, `o` = organizations). */
export const repositoryColumns = (sql: SqlClient.SqlClient) =>
  sql`r.id, r.org_id AS "orgId", o.slug AS owner, r.name, r.description, r.is_public AS "isPublic", r.head,
    r.created_at AS "createdAt", r.updated_at AS "updatedAt", r.version`

/** The entity key of a repository: its full name, case-folded like the unique index. */
export const repositoryKey = (owner: string, name: string): string => `${owner}/${name.toLowerCase()}`

// Records are immutable and the cached ones are shared by every read, so their API form (two
// ISO dates, a joined name) is built once per record rather than per request.
const apiForms = new WeakMap<RepositoryRecord, ApiSchemas.Repository>()

export const toApiRepository = (r: RepositoryRecord): ApiSchemas.Repository => {
  let api = apiForms.get(r)
  if (api === undefined) apiForms.set(r, api = buildApiRepository(r))
  return api
}

const buildApiRepository = (r: RepositoryRecord): ApiSchemas.Repository => ({
  id: r.id,
  owner: r.owner,
  name: r.name,
  full_name: `${r.owner}/${r.name}`,
  ...(r.description === null ? {} : { description: r.description }),
  is_public: r.isPublic,
  visibility: r.isPublic ? "public" : "private",
  head: r.head,
  default_branch: "main",
  created_at: r.createdAt.toISOString(),
  updated_at: r.updatedAt.toISOString()
})
