/**
 * What the integrity proof finds when content is missing, run against a migrated in-memory
 * database (PGlite): a tree or blob record that is not there, a chunk whose bytes are not stored,
 * each named with where it is and whether the head is affected; the depth and cone narrow the walk.
 */
import { DbEmbedded, Migrations, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { expect, layer } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Tree from "@grove/core/objects/Tree"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { Branches } from "../content/Branches.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { IntegrityProof, type ProofRequest } from "./IntegrityProof.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Live = IntegrityProof.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(Branches.layer, ContentObjects.layer, ChunkStore.layer)),
  Layer.provideMerge(ObjectStoreLocal.layer({ root: tempDirectory("grove-integrity-") }).pipe(Layer.orDie)),
  Layer.provideMerge(Db)
)

const created = "2026-11-25T00:00:00+00:00"
const request = (over: Partial<ProofRequest> = {}): ProofRequest => ({
  depth: null,
  branch: "b",
  selectedBranch: null,
  cone: undefined,
  verification: "existence",
  maxChunks: null,
  maxBytes: null,
  blob: null,
  withheld: new Set(),
  ...over
})

layer(Live, { timeout: 60_000 })("integrity proof", (it) => {
  it.effect("names a missing blob, a chunk without bytes and a missing tree with their paths; a healthy scope has no findings", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const chunks = yield* ChunkStore
      const orgId = randomUUID()
      const repoId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o1", name: "o1" })}`
      yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
      const ok = new TextEncoder().encode("ok\n")
      const okHash = Blake3.hash(ok)
      yield* chunks.putMany(orgId, [{ hash: okHash, data: ok }])
      yield* objects.registerBlobs(orgId, [{ hash: okHash, size: 3, chunks: [{ hash: okHash, offset: 0, size: 3 }] }])
      // A blob whose record exists but whose one chunk's bytes were never stored.
      const lost = "1".repeat(64)
      yield* objects.registerBlobs(orgId, [{ hash: lost, size: 5, chunks: [{ hash: lost, offset: 0, size: 5 }] }])
      const missing = "2".repeat(64)
      const goneTree = "3".repeat(64)
      const sub: ReadonlyArray<Tree.TreeEntry> = [{ name: "lost.bin", kind: "blob", hash: lost, mode: "regular" }]
      const subHash = Blake3.hash(Tree.encodeTree(sub))
      const root: ReadonlyArray<Tree.TreeEntry> = [
        { name: "dir", kind: "tree", hash: subHash, mode: "tree" },
        { name: "gone", kind: "tree", hash: goneTree, mode: "tree" },
        { name: "missing.txt", kind: "blob", hash: missing, mode: "regular" },
        { name: "ok.txt", kind: "blob", hash: okHash, mode: "regular" }
      ]
      const rootHash = Blake3.hash(Tree.encodeTree(root))
      yield* objects.storeTrees(orgId, [{ hash: rootHash, body: Tree.encodeTree(root) }, { hash: subHash, body: Tree.encodeTree(sub) }])
      const healthyRoot: ReadonlyArray<Tree.TreeEntry> = [{ name: "ok.txt", kind: "blob", hash: okHash, mode: "regular" }]
      const healthyHash = Blake3.hash(Tree.encodeTree(healthyRoot))
      yield* objects.storeTrees(orgId, [{ hash: healthyHash, body: Tree.encodeTree(healthyRoot) }])
      const commit = (hash: string, parent: string | null, manifest: string) =>
        sql`INSERT INTO commits ${sql.insert({ repo_id: repoId, hash, branch_name: "b", parent_hash: parent, manifest_hash: manifest, author: "t", timestamp: created, files: "[]", published: true })}`
      yield* commit("a".repeat(64), null, healthyHash)
      yield* commit("b".repeat(64), "a".repeat(64), rootHash)
      yield* sql`INSERT INTO branches ${sql.insert({ repo_id: repoId, name: "b", head: "b".repeat(64), created_by: "t", created_at: created })}`

      const proofs = yield* IntegrityProof
      const repo = { id: repoId, orgId }
      const proof = yield* proofs.prove(repo, request())
      expect(proof.commitCount).toBe(2)
      expect(proof.headAffected).toBe(true)
      const byCode = Object.fromEntries(proof.findings.map((f) => [f["code"] as string, f]))
      expect(Object.keys(byCode).sort()).toEqual(["missing_blob", "missing_chunk", "missing_tree"])
      expect(byCode["missing_blob"]).toMatchObject({ blob_hash: missing, affected: [{ commit: "b".repeat(64), path: "missing.txt" }] })
      expect(byCode["missing_chunk"]).toMatchObject({ blob_hash: lost, affected: [{ path: "dir/lost.bin" }] })
      expect(byCode["missing_tree"]).toMatchObject({ tree_hash: goneTree, commit_hash: "b".repeat(64) })

      // Metadata only: the chunk's bytes are not looked at.
      const metadata = yield* proofs.prove(repo, request({ verification: "metadata" }))
      expect(metadata.findings.map((f) => f["code"]).sort()).toEqual(["missing_blob", "missing_tree"])
      // A cone outside the damage, or the healthy first commit alone, has no findings.
      const cone = yield* proofs.prove(repo, request({ cone: ["ok.txt"] }))
      expect(cone.findings.filter((f) => f["code"] !== "missing_tree")).toEqual([])
      expect(cone.blobCount).toBe(1)
      const withheld = yield* proofs.prove(repo, request({ withheld: new Set([missing, lost]) }))
      expect(withheld.findings.map((f) => f["code"])).toEqual(["missing_tree"])
      yield* sql`UPDATE branches SET head = ${"a".repeat(64)} WHERE repo_id = ${repoId}`
      const healthy = yield* proofs.prove(repo, request({ verification: "bytes", depth: 1 }))
      expect(healthy).toMatchObject({ findings: [], commitCount: 1, verifiedByteCount: 3, headAffected: false })
      const budget = yield* proofs.prove(repo, request({ verification: "bytes", depth: 1, maxBytes: 2 }))
      expect(budget).toMatchObject({ budgetExhausted: true, findings: [expect.objectContaining({ code: "verification_budget_exhausted" })] })

      // A blob whose stored chunk is there, at its size, but whose bytes hash to something else: only `bytes` sees it.
      const liar = "4".repeat(64)
      yield* objects.registerBlobs(orgId, [{ hash: liar, size: 3, chunks: [{ hash: okHash, offset: 0, size: 3 }] }])
      const lying: ReadonlyArray<Tree.TreeEntry> = [{ name: "liar.txt", kind: "blob", hash: liar, mode: "regular" }]
      const lyingHash = Blake3.hash(Tree.encodeTree(lying))
      yield* objects.storeTrees(orgId, [{ hash: lyingHash, body: Tree.encodeTree(lying) }])
      yield* commit("c".repeat(64), "a".repeat(64), lyingHash)
      yield* sql`UPDATE branches SET head = ${"c".repeat(64)} WHERE repo_id = ${repoId}`
      expect((yield* proofs.prove(repo, request({ depth: 1 }))).findings).toEqual([])
      const bytes = yield* proofs.prove(repo, request({ verification: "bytes", depth: 1 }))
      expect(bytes).toMatchObject({ headAffected: true, findings: [expect.objectContaining({ code: "blob_hash_mismatch", blob_hash: liar })] })
    }))
})
