/**
 * Issue 24: a one-file push into a big tree must cost what it changes, not what its directories hold.
 * Push preparation on a migrated in-memory PGlite, published by the Branch entity's Push handler: the
 * blobs a push checks and records (its staged object list, what the command inserts into repo_blobs) are
 * the ones it places at a new path, not every sibling in the directories it changed; the repository still
 * reaches every blob, and a blob placed without being uploaded is still refused.
 */
import { Outbox } from "@grove/bus"
import type { Entity } from "@grove/bus"
import { Migrations, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type Built, buildCommit, type Files, inlineBlobs, pushBody } from "../../../../test/support/content.ts"
import { push } from "./BranchCommands.ts"
import { storeUploaded } from "./ChunkUploads.ts"
import { ChunkStore } from "./ChunkStore.ts"
import { ContentObjects, type DedupScope } from "./ContentObjects.ts"
import { preparePush, PushRejected } from "./PushPreparation.ts"
import { countedDatabase } from "../db/CountedDatabase.testing.ts"
import { repositoryRows } from "../entities/Commands.testing.ts"

const { traffic, layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Store = ObjectStoreLocal.layer({ root: tempDirectory("grove-push-prep-") }).pipe(Layer.orDie)
const Services = Layer.mergeAll(ContentObjects.layer, ChunkStore.layer).pipe(Layer.provideMerge(Layer.merge(Db, Store)))

/** A directory of 40 files beside another one: what a one-file push's directories hold. */
const TREE: Files = Object.fromEntries([
  ...Array.from({ length: 40 }, (_, i) => [`src/lib/f${i}.ts`, `export const f${i} = ${i}\n`]),
  ["src/main.ts", "main\n"],
  ["README.md", "readme\n"]
])

const world = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const slug = `o${randomUUID().slice(0, 8)}`
  const { orgId, repoId } = yield* repositoryRows(slug)
  const scope: DedupScope = { orgId, repoId, principal: "user:u", readable: [repoId], restricted: [] }
  const outbox = Outbox.forCommand({ partition: 0, key: `${slug}/r`, onRow: () => {} })
  /** Prepared as the sync handler does (only `sent` blobs carried inline), then published by the Push command. */
  const pushed = (branch: string, built: Built, sent: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const body = pushBody({ branch, commits: [built], blobs: inlineBlobs(built, new Set(sent)) })
      const prepared = yield* preparePush({ id: repoId, orgId }, body as never, scope)
      const stagedId = yield* (yield* ContentObjects).stagePush(repoId, { trees: prepared.newTrees, blobs: prepared.newBlobs })
      const context = { entityId: `${slug}/r:${branch}`, commandId: randomUUID(), entityType: "Branch", command: "Push", partition: 0 }
      const reply = yield* sql.withTransaction(push({
        stagedId,
        commits: prepared.commits,
        tip: prepared.tip,
        force: false,
        branch: body.branch as never,
        actor: "u"
      }, context as Entity.CommandContext)).pipe(Effect.provideService(Outbox.Outbox, outbox))
      expect(reply.success).toBe(true)
      return prepared
    })
  const reached = sql<{ hash: string }>`SELECT blob_hash AS hash FROM repo_blobs WHERE repo_id = ${repoId}`.pipe(
    Effect.map((rows) => rows.map((r) => r.hash).sort())
  )
  /** Each blob of `built` uploaded as the one chunk carrying its hash (granted to the caller), as the client sends small files. */
  const upload = (built: Built) => storeUploaded(orgId, scope, [...built.contents].map(([hash, data]) => ({ hash, data })))
  return { repoId, scope, pushed, reached, upload, prepare: (body: unknown) => preparePush({ id: repoId, orgId }, body as never, scope) }
})

const blobOf = (built: Built, file: string) => built.snapshot.get(file)!.hash
const sorted = (xs: Iterable<string>) => [...xs].sort()

layer(Services, { timeout: 120_000, excludeTestServices: true })("push preparation", (it) => {
  it.effect("a one-file push checks and records the blob it changed, not its directory's 40 others", () =>
    Effect.gen(function*() {
      const w = yield* world
      const first = buildCommit({ branch: "b", files: TREE })
      const all = sorted(first.contents.keys())
      const version = (yield* SqlClient.SqlClient)<{ version: number }>`SELECT version FROM repositories WHERE id = ${w.repoId}`.pipe(
        Effect.map((rows) => Number(rows[0]!.version))
      )
      const versionBefore = yield* version
      expect(sorted((yield* w.pushed("b", first, all)).newBlobs)).toEqual(all)
      // A push to a branch changes the repository's row (updated_at), and so its version (caches compare by it).
      expect(yield* version).toBe(versionBefore + 1)

      const second = buildCommit({ branch: "b", files: { ...TREE, "src/lib/f7.ts": "changed\n" }, parent: first })
      const changed = blobOf(second, "src/lib/f7.ts")
      const prepared = yield* w.pushed("b", second, [changed])
      // On the old code: all 40 blobs of src/lib (every blob of every tree the push made new).
      expect(prepared.newBlobs).toEqual([changed])
      expect(yield* w.reached).toEqual(sorted(new Set([...all, changed])))

      // A blob moved to a new path (not re-sent: the repository has it) counts as placed; the rest do not.
      const moved = buildCommit({ branch: "b", files: { ...TREE, "src/lib/f7.ts": "changed\n", "docs/f1.ts": TREE["src/lib/f1.ts"]! }, parent: second })
      expect((yield* w.pushed("b", moved, [])).newBlobs).toEqual([blobOf(moved, "docs/f1.ts")])
    }))

  it.effect("a one-file push six directories deep asks which of its trees the repository has in one query, not one per level", () =>
    Effect.gen(function*() {
      const w = yield* world
      const deep = "a/b/c/d/e/f.ts"
      const first = buildCommit({ branch: "d", files: { ...TREE, [deep]: "deep\n" } })
      yield* w.pushed("d", first, sorted(first.contents.keys()))
      const second = buildCommit({ branch: "d", files: { ...TREE, [deep]: "deeper\n" }, parent: first })
      const changed = blobOf(second, deep)
      const objects = yield* ContentObjects
      const asked: Array<number> = []
      const counted = ContentObjects.of({ ...objects, repoTrees: (repoId, hashes) => (asked.push(hashes.length), objects.repoTrees(repoId, hashes)) })
      const prepared = yield* w.prepare(pushBody({ branch: "d", commits: [second], blobs: inlineBlobs(second, new Set([changed])) })).pipe(
        Effect.provideService(ContentObjects, counted)
      )
      // On the old code: six queries (the root, then a level at a time down to a/b/c/d/e).
      expect(asked).toHaveLength(1)
      expect(prepared.newTrees).toHaveLength(6) // the root and a, a/b, ..., a/b/c/d/e: src and its subtree are known
      expect(prepared.newBlobs).toEqual([changed])
    }))

  it.effect("a one-file push reads no tree from the database: its parent's trees are remembered from the push that stored them", () =>
    Effect.gen(function*() {
      const w = yield* world
      const deep = "a/b/c/d/e/f.ts"
      const first = buildCommit({ branch: "t", files: { ...TREE, [deep]: "deep\n" } })
      yield* w.pushed("t", first, sorted(first.contents.keys()))
      let parent = first
      for (const content of ["deeper\n", "deepest\n"]) {
        const next = buildCommit({ branch: "t", files: { ...TREE, [deep]: content }, parent })
        const changed = blobOf(next, deep)
        const before = traffic.statements.length
        const prepared = yield* w.prepare(pushBody({ branch: "t", commits: [next], blobs: inlineBlobs(next, new Set([changed])) }))
        expect(prepared.newBlobs).toEqual([changed])
        // On the old code: six, the parent's root, a, a/b, ... a/b/c/d/e read a level at a time.
        expect(traffic.statements.slice(before).filter((text) => /FROM trees\b/.test(text))).toEqual([])
        yield* w.pushed("t", next, [changed])
        parent = next
      }
    }))

  it.effect("a changed file whose blob was neither uploaded nor stored is still refused", () =>
    Effect.gen(function*() {
      const w = yield* world
      const first = buildCommit({ branch: "c", files: TREE })
      yield* w.pushed("c", first, sorted(first.contents.keys()))
      const second = buildCommit({ branch: "c", files: { ...TREE, "src/lib/f3.ts": "never uploaded\n" }, parent: first })
      const refused = yield* Effect.flip(w.prepare(pushBody({ branch: "c", commits: [second], blobs: [] })))
      expect(refused).toBeInstanceOf(PushRejected)
      expect((refused as PushRejected).code).toBe("missing_blob")
    }))

  it.effect("small blobs uploaded as chunks are found with their grants in one statement per slice; the rest as before", () =>
    Effect.gen(function*() {
      const w = yield* world
      const sql = yield* SqlClient.SqlClient
      const first = buildCommit({ branch: "u", files: TREE })
      yield* w.upload(first)
      // One chunk's grant is older than recordUploads leaves as it is: found through `present`, and renewed.
      const stale = blobOf(first, "README.md")
      yield* sql`UPDATE object_uploads SET created_at = now() - interval '1 hour' WHERE repo_id = ${w.repoId} AND hash = ${stale}`
      const before = traffic.statements.length
      const prepared = yield* w.prepare(pushBody({ branch: "u", commits: [first], blobs: [] }))
      const ran = traffic.statements.slice(before)
      expect(sorted(prepared.newBlobs)).toEqual(sorted(first.contents.keys()))
      // On the old code: chunk sizes, present (its reach and the caller's uploads), blob sizes and the grants' probe
      // each read all 42 (the statements below, one each, and no statement reading `FROM chunks c`).
      expect(ran.filter((text) => /FROM chunks c\b/.test(text))).toHaveLength(1)
      expect(ran.filter((text) => /FROM blobs WHERE/.test(text))).toHaveLength(1) // the stale one's, alone
      const registered = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM blobs b JOIN blob_chunks bc
        ON bc.org_id = b.org_id AND bc.blob_hash = b.hash AND bc.chunk_hash = b.hash WHERE b.org_id = ${w.scope.orgId} AND b.hash = ANY(${[...first.contents.keys()]})`
      expect(registered[0]!.n).toBe(first.contents.size)
      const renewed = yield* sql<{ fresh: boolean }>`SELECT created_at > now() - interval '1 minute' AS fresh FROM object_uploads
        WHERE repo_id = ${w.repoId} AND hash = ${stale}`
      expect(renewed[0]!.fresh).toBe(true)
    }))

  it.effect("parents outside the push are told from later commits by a set: five times the commits cost about five times", () =>
    Effect.gen(function*() {
      const w = yield* world
      /** `n` commits in a chain, each merging a commit the repository does not have: refused (missing_parent) after the scan. */
      const refused = (n: number) => {
        const commits: Array<Built> = []
        for (let i = 0; i < n; i++) {
          commits.push(buildCommit({ branch: "m", files: {}, parent: commits.at(-1) ?? null, mergeParent: `${i}`.padStart(64, "e") }))
        }
        const body = pushBody({ branch: "m", commits, blobs: [] })
        return Effect.gen(function*() {
          const { system, user } = process.threadCpuUsage()
          const failed = yield* Effect.flip(w.prepare(body))
          expect((failed as PushRejected).code).toBe("missing_parent")
          const after = process.threadCpuUsage()
          return (after.user + after.system - user - system) / 1000
        })
      }
      const [small, large] = [refused(1500), refused(7500)]
      const times: Array<[number, number]> = []
      for (let round = 0; round < 3; round++) times.push([yield* small, yield* large])
      const [s, l] = [Math.min(...times.map((t) => t[0])), Math.min(...times.map((t) => t[1]))]
      console.log(`commits' parent check CPU ms, 1,500 / 7,500 commits: ${s.toFixed(0)} / ${l.toFixed(0)}`)
      // On the old code (a scan of the push per parent outside it): 32 / 801 ms, 25x.
      expect(l).toBeLessThan(Math.max(s * 12, 200))
    }))
})
