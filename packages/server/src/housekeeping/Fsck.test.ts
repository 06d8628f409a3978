/**
 * fsck against a migrated in-memory database (PGlite) and a local object store: a healthy
 * repository has no problems; then each kind of damage is planted once and fsck names exactly it —
 * a branch head to nothing, a commit whose fields do not hash to it, a tree whose text does not, a
 * tree entry to a blob that is not stored, a blob whose chunk list does not add up, a chunk object
 * deleted, a chunk inside a pack overwritten, a release binary, a tree a repository reaches, a
 * staged push's commit and a CI cache that are not stored. Each check also runs a row per page.
 */
import { expect, layer } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import { hashCommit } from "@grove/core/objects/Commit"
import { parseTimestamp } from "@grove/core/objects/Timestamp"
import * as Tree from "@grove/core/objects/Tree"
import { DbEmbedded, Migrations, ObjectStore, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { Effect, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import * as Fsck from "./Fsck.ts"
import type { Problem } from "./FsckReport.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Live = Layer.mergeAll(ContentObjects.layer, ChunkStore.layer).pipe(
  Layer.provideMerge(ObjectStoreLocal.layer({ root: tempDirectory("grove-fsck-") }).pipe(Layer.orDie)),
  Layer.provideMerge(Db)
)

const created = "2026-11-25T00:00:00+00:00"
const bytes = (text: string) => new TextEncoder().encode(text)

const checkWith = (page: number | undefined) =>
  Effect.gen(function*() {
    const problems: Array<Problem> = []
    const summary = yield* Fsck.run({ concurrency: 4, page }, (p) => Effect.sync(() => void problems.push(p)))
    return { summary, found: problems.map((p) => `${p.kind} ${p.object} ${p.name}`).sort(), problems }
  })

/** One walk with the default page size, one a row per page (every walk's cursor used): both find the same. */
const check = Effect.gen(function*() {
  const whole = yield* checkWith(undefined)
  const paged = yield* checkWith(1)
  expect(paged.found).toEqual(whole.found)
  expect(paged.summary.counts).toEqual(whole.summary.counts)
  return whole
})

layer(Live, { timeout: 60_000 })("fsck", (it) => {
  it.effect("a healthy store has no problems; each planted damage is named once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const chunks = yield* ChunkStore
      const store = yield* ObjectStore.ObjectStore
      const orgId = randomUUID()
      const repoId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o1", name: "o1" })}`
      yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`

      // Two small files arrive together (one pack); a third alone (an object of its own).
      const [a, b, c] = [bytes("alpha\n"), bytes("beta beta\n"), bytes("gamma gamma gamma\n")]
      const [ha, hb, hc] = [a, b, c].map((x) => Blake3.hash(x)) as [string, string, string]
      yield* chunks.putMany(orgId, [{ hash: ha, data: a }, { hash: hb, data: b }])
      yield* chunks.putMany(orgId, [{ hash: hc, data: c }])
      yield* objects.registerBlobs(orgId, [a, b, c].map((data, i) => {
        const hash = [ha, hb, hc][i]!
        return { hash, size: data.length, chunks: [{ hash, offset: 0, size: data.length }] }
      }))
      const entries: ReadonlyArray<Tree.TreeEntry> = [
        { name: "a.txt", kind: "blob", hash: ha, mode: "regular" },
        { name: "b.txt", kind: "blob", hash: hb, mode: "regular" },
        { name: "c.txt", kind: "blob", hash: hc, mode: "regular" }
      ]
      const root = Tree.hashTree(entries)
      yield* objects.storeTrees(orgId, [{ hash: root, body: Tree.encodeTree(entries) }])
      const fields = { branch_name: "main", parent_hash: null, merge_parent_hash: null, manifest_hash: root, author: "t", message: "m", timestamp: parseTimestamp(created)! }
      const head = hashCommit(fields)
      const insertCommit = (hash: string, manifest: string) =>
        sql`INSERT INTO commits ${
          sql.insert({ repo_id: repoId, hash, branch_name: "main", parent_hash: null, manifest_hash: manifest, author: "t", message: "m", timestamp: created, files: "[]", published: true })
        }`
      yield* insertCommit(head, root)
      yield* sql`INSERT INTO branches ${sql.insert({ repo_id: repoId, name: "main", head, created_by: "t", created_at: created })}`
      yield* sql`INSERT INTO repo_trees ${sql.insert({ repo_id: repoId, tree_hash: root })}`
      // A CI log piece (SHA-256 in the organization's CI namespace).
      const [run] = yield* sql<{ id: string }>`INSERT INTO ci_runs ${
        sql.insert({ repo_id: repoId, workflow_name: "w", workflow_path: "w.yml", event: "push", branch: "main", commit_hash: head, triggered_by: "t", status: "completed" })
      } RETURNING id::text AS id`
      const log = bytes("step output\n")
      const logHash = createHash("sha256").update(log).digest("hex")
      yield* store.put({ namespace: `ci-${orgId}`, hash: logHash }, Stream.make(log))
      yield* sql`INSERT INTO ci_log_chunks ${sql.insert({ run_id: run!.id, step_id: 0, seq: 0, object_hash: logHash, bytes: log.length })}`

      const healthy = yield* check
      expect(healthy.found).toEqual([])
      expect(healthy.summary.counts).toMatchObject({ repositories: 1, branches: 1, commits: 1, trees: 1, blobs: 3, chunks: 3, packs: 1, objects: 3, ciObjects: 1 })

      // The damage, one of each kind.
      const ghost = "1".repeat(64)
      yield* sql`INSERT INTO branches ${sql.insert({ repo_id: repoId, name: "ghost", head: ghost, created_by: "t", created_at: created })}`
      const liar = "2".repeat(64)
      yield* insertCommit(liar, root)
      const missingBlob = "3".repeat(64)
      const badText = Tree.encodeTree([{ name: "gone.txt", kind: "blob", hash: missingBlob, mode: "regular" }])
      const badTree = "4".repeat(64)
      yield* objects.storeTrees(orgId, [{ hash: badTree, body: badText }])
      yield* sql`INSERT INTO repo_trees ${sql.insert({ repo_id: repoId, tree_hash: badTree })}`
      // A tree no repository reaches (its repository was deleted) naming a blob gc freed: garbage, not damage.
      const freed: ReadonlyArray<Tree.TreeEntry> = [{ name: "freed.txt", kind: "blob", hash: "c".repeat(64), mode: "regular" }]
      yield* objects.storeTrees(orgId, [{ hash: Tree.hashTree(freed), body: Tree.encodeTree(freed) }])
      const short = "5".repeat(64)
      yield* objects.registerBlobs(orgId, [{ hash: short, size: 99, chunks: [{ hash: hc, offset: 0, size: c.length }] }])
      yield* store.delete({ namespace: orgId, hash: hc })
      const [packRow] = yield* sql<{ pack: string }>`SELECT pack FROM chunks WHERE org_id = ${orgId} AND hash = ${hb}`
      yield* store.delete({ namespace: orgId, hash: packRow!.pack })
      yield* store.put({ namespace: orgId, hash: packRow!.pack }, Stream.make(bytes("alpha\nbeta BETA\n")))
      const release = "6".repeat(64)
      yield* sql`INSERT INTO releases ${sql.insert({ version: "1.0.0", platform: "linux-x64", sha256: release, size: 10, minisig: "m", published_by: "t" })}`

      const unreached = "7".repeat(64)
      yield* sql`INSERT INTO repo_trees ${sql.insert({ repo_id: repoId, tree_hash: unreached })}`
      const staged = "8".repeat(64)
      yield* sql`INSERT INTO push_stages ${
        sql.insert({ repo_id: repoId, stage_id: "s1", principal: "user:t", branch: "main", branch_identity: "i", force: false, state: "active", expires_at: "2999-01-01T00:00:00Z" })
      }`
      yield* sql`INSERT INTO push_stage_objects ${sql.insert({ repo_id: repoId, stage_id: "s1", kind: "commit", hash: staged })}`
      const cache = "9".repeat(64)
      yield* sql`INSERT INTO ci_caches ${sql.insert({ repo_id: repoId, branch: "main", cache_key: "k", object_hash: cache, bytes: 5 })}`

      const damaged = yield* check
      expect(damaged.found).toEqual([
        `corrupt chunk ${hb}`,
        `corrupt commit ${liar}`,
        `corrupt pack ${packRow!.pack}`,
        `corrupt tree ${badTree}`,
        `malformed blob ${short}`,
        `missing blob ${missingBlob}`,
        `missing chunk ${hc}`,
        `missing commit ${ghost}`,
        `missing release ${release}`,
        `missing tree ${unreached}`,
        `missing commit ${staged}`,
        `missing ci-cache ${cache}`
      ].sort())
      const byName = new Map(damaged.problems.map((p) => [p.name, p]))
      expect(byName.get(ghost)).toMatchObject({ owner: "o1/r", referencedBy: "branch ghost" })
      expect(byName.get(missingBlob)).toMatchObject({ owner: "o1", referencedBy: `tree ${badTree} (entry gone.txt)` })
      expect(byName.get(hc)?.referencedBy).toContain(`blob ${hc}`)
      expect(byName.get(release)).toMatchObject({ referencedBy: "release 1.0.0 linux-x64", detail: "not in the object store" })
      expect(byName.get(unreached)).toMatchObject({ owner: "o1", referencedBy: "repository o1/r (repo_trees)" })
      expect(byName.get(staged)).toMatchObject({ owner: "o1/r", referencedBy: "staged push s1 to o1/r" })
      expect(byName.get(cache)).toMatchObject({ referencedBy: "CI cache k of o1/r on main" })
      expect(damaged.summary.problems).toEqual({ missing: 7, corrupt: 4, malformed: 1, unreadable: 0 })
    }))
})
