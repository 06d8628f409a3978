/**
 * trees -> organizations and repo_trees -> repositories are foreign keys again (0020 made them statement triggers).
 * A statement trigger costs ~0.5 ms of PGlite CPU per statement whatever its row count (two queries planned per
 * call), a foreign key a probe per row: for a push's 300 trees the two are close (~28 vs ~31 ms), but every merge,
 * sync and revert inserts a few trees and repo_trees rows in its command's transaction, where the triggers cost
 * ~1-1.5 ms of a ~6 ms command (bench:merge, 1,000-file tree, server CPU per merge, 4 alternating pairs at load
 * 3-5: medians ~8.2 ms with all of 0020's triggers, ~6.7 without 0020, ~7.0 with this; noisy). The five references
 * whose inserts are a push's thousands of rows keep 0020's triggers. Between 0020 and this migration the triggers refused orphans, so the keys validate.
 * Both databases run the same SQL; IF EXISTS: applying it again changes nothing.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const restored: ReadonlyArray<{ child: string; column: string; parent: string }> = [
  { child: "trees", column: "org_id", parent: "organizations" },
  { child: "repo_trees", column: "repo_id", parent: "repositories" }
]

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  for (const r of restored) {
    yield* sql.unsafe(`DROP TRIGGER IF EXISTS ${r.child}_parents ON ${r.child}`)
    yield* sql.unsafe(`DROP TRIGGER IF EXISTS ${r.parent}_delete_${r.child} ON ${r.parent}`)
    yield* sql.unsafe(`DROP TRIGGER IF EXISTS ${r.child}_reference_fixed ON ${r.child}`)
    yield* sql.unsafe(`ALTER TABLE ${r.child} DROP CONSTRAINT IF EXISTS ${r.child}_${r.column}_fkey`)
    yield* sql.unsafe(`ALTER TABLE ${r.child} ADD CONSTRAINT ${r.child}_${r.column}_fkey FOREIGN KEY (${r.column})
      REFERENCES ${r.parent} (id) ON DELETE CASCADE`)
  }
})
