/**
 * Tree bodies and staged push lists are stored without compression (STORAGE EXTERNAL: out of line past ~2 KB as
 * before, but not pglz-compressed), where compressing costs a push's CPU and saves little or nothing: a tree body is
 * mostly hex hashes, which pglz (no entropy coding) shrinks by ~25% (a 100-entry body 9,789 -> 7,317 bytes, a
 * 1,000-entry one 98,889 -> 72,146), and a staged list (a 5k-file push's ~0.35 MiB of hashes, jsonb) not at all:
 * pglz gives up after trying, and the row is deleted by the push's command moments later. Per 5k-file first push,
 * PGlite CPU per insert (micro-benchmark on disk, medians of 10): 313 trees 19.6 -> 9.3 ms, the staged list
 * 12.2 -> 4.0 ms; a read of a big tree (a clone reads them all) no longer decompresses it. Trees take ~1/3 more
 * space. Commits' file lists stay compressed (json with repeated keys: 0.9 MiB -> 0.39 MiB for 5,000 files, for
 * ~6 ms of CPU).
 * Only values written from now on change; stored rows are read as before (compressed or not), so every reader and a
 * previous version's node in a rolling upgrade are unaffected. Both databases run the same SQL.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE trees ALTER COLUMN body SET STORAGE EXTERNAL`
  yield* sql`ALTER TABLE staged_pushes ALTER COLUMN body SET STORAGE EXTERNAL`
})
