/**
 * Benchmark: what closing gc's race windows costs a push's publishing transaction. The Push command's
 * `account` (repository rows, sizes, quota) alone, the baseline, against `lockReferenced` then `account`
 * (what `publishPrepared` runs: every referenced blob and chunk checked stored, marked ones locked), for a push of
 * `--blobs` new blobs (one chunk each), alternating, each in a transaction rolled back (same state every
 * round); on PGlite (embedded) and on PostgreSQL (a private server). Prints medians and the ratio.
 *
 *   node scripts/bench/publish-lock.ts [--blobs 20000 --rounds 7 --skip-postgres]
 */
import { DbEmbedded, DbPostgres, Migrations } from "@grove/storage"
import { Data, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import type { RepositoryRecord } from "../../packages/server/src/access/RepositoryRecord.ts"
import { account } from "../../packages/server/src/content/BranchCommands.ts"
import { lockReferenced } from "../../packages/server/src/content/ReferencedObjects.ts"
import { startPostgres } from "../infra/postgres.ts"
import { numberArg } from "./load.ts"

const BLOBS = numberArg("blobs", 20_000)
const ROUNDS = numberArg("rounds", 7)

class Rollback extends Data.TaggedError("Rollback")<{ readonly lock: number; readonly total: number }> {}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const measure = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const orgId = randomUUID()
  const repoId = randomUUID()
  yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: `b${orgId.slice(0, 8)}`, name: "b" })}`
  yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
  const hashes = Array.from({ length: BLOBS }, (_, i) => createHash("sha256").update(`blob ${i}`).digest("hex"))
  for (let i = 0; i < hashes.length; i += 2000) {
    const slice = hashes.slice(i, i + 2000)
    yield* sql`INSERT INTO chunks (org_id, hash, size) SELECT ${orgId}, unnest(${slice}::text[]), 100`
    yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) SELECT ${orgId}, unnest(${slice}::text[]), 100, 1`
    yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size)
      SELECT ${orgId}, h, 0, h, 0, 100 FROM unnest(${slice}::text[]) AS h`
  }
  const repo = { id: repoId, orgId, owner: "b", name: "r" } as RepositoryRecord
  const body = { trees: [], blobs: hashes }
  /** ms of the check and lock (0 without), and of the whole publish. */
  const timed = (lock: boolean): Effect.Effect<{ lock: number; total: number }, unknown, SqlClient.SqlClient> =>
    sql.withTransaction(Effect.gen(function*() {
      const started = performance.now()
      if (lock) yield* lockReferenced(orgId, body.blobs)
      const locked = performance.now()
      yield* account(repo, body)
      return yield* Effect.fail(new Rollback({ lock: locked - started, total: performance.now() - started }))
    })).pipe(Effect.catch((e) => e instanceof Rollback ? Effect.succeed({ lock: e.lock, total: e.total }) : Effect.fail(e)))
  yield* timed(false)
  yield* timed(true)
  const base: Array<number> = []
  const total: Array<number> = []
  const lock: Array<number> = []
  for (let i = 0; i < ROUNDS; i++) {
    base.push((yield* timed(false)).total)
    const t = yield* timed(true)
    total.push(t.total)
    lock.push(t.lock)
  }
  return { base: median(base), locked: median(total), lock: median(lock) }
})

const report = (name: string, r: { base: number; locked: number; lock: number }) =>
  console.log(`${name.padEnd(11)} account ${r.base.toFixed(1).padStart(7)} ms   lock + account ${r.locked.toFixed(1).padStart(7)} ms   ` +
    `${(r.locked / r.base).toFixed(2)}x   (the check and lock statement alone: ${r.lock.toFixed(1)} ms, ${(r.lock / r.base * 100).toFixed(1)}% of account)`)

const run = (db: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Effect.runPromise(Effect.scoped(measure.pipe(Effect.provide(Migrations.layer.pipe(Layer.provideMerge(db), Layer.orDie)))))

console.log(`publishing ${BLOBS} new blobs (one chunk each), median of ${ROUNDS} alternating rounds, load ${(await import("node:os")).loadavg()[0]!.toFixed(1)}`)
report("PGlite", await run(DbEmbedded.layer({})))
if (!process.argv.includes("--skip-postgres")) {
  report("PostgreSQL", await run(Layer.unwrap(Effect.map(startPostgres(), (server) => DbPostgres.layer({ url: server.url })))))
}
