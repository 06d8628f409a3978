/**
 * Published client releases (issue 27): one row per version and platform, never overwritten (the
 * primary key is the compare-and-set). The binary is in the object store under its SHA-256
 * (namespace `releases`); the row keeps its size and minisign signature.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE releases (
    version text NOT NULL,
    platform text NOT NULL,
    sha256 text NOT NULL,
    size bigint NOT NULL,
    minisig text NOT NULL,
    published_by text NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (version, platform)
  )`
})
