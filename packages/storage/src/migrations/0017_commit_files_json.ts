/**
 * A commit's file list as `json`, not `jsonb`: nothing queries into it (it is read whole and parsed by the
 * server), and parsing a big push's list (5,000 files, ~1 MiB) into jsonb's tree grew the embedded
 * database's WebAssembly memory by ~9 MiB for good (measured per statement, scripts/bench/memory-pushes.ts),
 * and cost ~100 ms of its CPU per such push. `json` only checks the text and stores it.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE commits ALTER COLUMN files TYPE json USING files::json`
})
