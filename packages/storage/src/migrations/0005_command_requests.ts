/**
 * Commands are recorded in the inbox when they are sent, not only when they
 * are handled: `owner` is who sent the command (only they may read its
 * outcome), `fingerprint` binds an idempotency key to the request it was first
 * used for, and a row without a reply is a command in flight, so an unknown
 * operation id is told apart from a pending one.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE command_inbox ADD COLUMN owner text`
  yield* sql`ALTER TABLE command_inbox ADD COLUMN fingerprint text`
  yield* sql`CREATE INDEX command_inbox_pending ON command_inbox (created_at) WHERE reply IS NULL`
})
