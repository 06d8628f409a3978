/**
 * Blobs lose their `referenced` mark: only chunks count against the quota, and a blob is referenced exactly
 * when its chunks are (content/BranchCommands.ts `account`). The mark on blobs only narrowed the publish's
 * chunk lookup, and setting it rewrote every new blob row once more (5,000 per 5k-file first push).
 * Dropping a column does not rewrite the table.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE blobs DROP COLUMN referenced`
})
