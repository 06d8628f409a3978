/**
 * Who uploaded which object to which repository. Bytes stay stored once per organization (dedup),
 * but an object counts as present for a caller only when a repository the caller can read reaches
 * it, or when the caller uploaded it (to a repository it can read): dedup must never grant access.
 * `hash` is a chunk, blob or tree hash; `principal` is `user:<id>` or `service_account:<id>`.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE object_uploads (
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    principal text NOT NULL,
    hash text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repo_id, principal, hash)
  )`
})
