/**
 * Blobs are no longer marked `referenced`: only chunks count against the quota, and a blob is referenced exactly
 * when its chunks are (content/BranchCommands.ts `account`). The mark on blobs only narrowed the publish's chunk
 * lookup, and setting it rewrote every new blob row once more (5,000 per 5k-file first push).
 *
 * The column stays, with its default, for one release: in a rolling upgrade the nodes still on the previous version
 * set it in each publish (`UPDATE blobs SET referenced = true ... RETURNING hash`), and their charge stays right,
 * because they charge only chunks not yet referenced. Nothing reads it from this version on. A later migration, in a
 * release whose previous one already has this one, drops it: `ALTER TABLE blobs DROP COLUMN IF EXISTS referenced`
 * (IF EXISTS: development data dirs from before this change had it dropped by 0018's first form).
 * The comment below says so to whoever reads the schema.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`COMMENT ON COLUMN blobs.referenced IS
    'unused since migration 0018: kept for the previous version''s nodes in a rolling upgrade; dropped by a later release'`
})
