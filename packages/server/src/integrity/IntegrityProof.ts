/**
 * The integrity proof (`GET …/integrity`): walks the commits of a scope (every branch head's
 * history, or the newest `depth` first-parent commits of one branch), their trees and the blobs
 * they reach, and checks each is stored, at the requested depth of verification: `metadata`
 * (commit, tree and blob records), `existence` (also every chunk's bytes are stored), `bytes`
 * (every blob re-read and re-hashed, within `max_chunks` / `max_bytes`). Findings name what is
 * missing and where; a clone admits only a healthy, complete proof.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import * as SparseCone from "@grove/core/objects/SparseCone"
import * as Tree from "@grove/core/objects/Tree"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { Branches } from "../content/Branches.ts"
import { type ChunkReadError, ChunkStore } from "../content/ChunkStore.ts"
import { readChunks } from "../content/ChunkReads.ts"
import { type BlobInfo, ContentObjects } from "../content/ContentObjects.ts"
import { type Capture, captureOf } from "./IntegritySnapshot.ts"

export type Verification = "metadata" | "existence" | "bytes"

export interface ProofRequest {
  readonly depth: number | null
  readonly branch: string | null
  readonly selectedBranch: string | null
  readonly cone: ReadonlyArray<string> | undefined
  readonly verification: Verification
  readonly maxChunks: number | null
  readonly maxBytes: number | null
  /** A blob whose evidence the report should carry (`oak blob info`). */
  readonly blob: string | null
  /** Blobs the caller may not read (path permissions): neither checked nor named. */
  readonly withheld: ReadonlySet<string>
}

/** The empty directory's tree: never stored, always there. */
const EMPTY_TREE = Blake3.hash(Tree.encodeTree([]))

/** Locations a finding names at most. */
const MAX_AFFECTED = 20

type Finding = Record<string, unknown>

export interface Proof {
  readonly capture: Capture
  readonly commitCount: number
  readonly manifestCount: number
  readonly blobCount: number
  readonly chunkCount: number
  readonly verifiedChunkCount: number
  readonly verifiedByteCount: number
  readonly findings: ReadonlyArray<Finding>
  readonly blobEvidence: ReadonlyArray<Record<string, unknown>>
  readonly headAffected: boolean
  readonly budgetExhausted: boolean
}

const recoverability = (code: string) => code === "verification_budget_exhausted" ? "inconclusive" : "repush_from_complete_clone"

export class IntegrityProof extends Context.Service<IntegrityProof, {
  /** The branch heads a scope depends on: every head (or only the history head, for `depth`), the selected branch's record. */
  readonly capture: (repoId: string, depth: number | null, branch: string | null, selectedBranch: string | null) => Effect.Effect<Capture, SqlError>
  readonly prove: (repo: { readonly id: string; readonly orgId: string }, request: ProofRequest) => Effect.Effect<Proof, ChunkReadError>
}>()("grove/server/integrity/IntegrityProof") {
  static readonly layer = Layer.effect(IntegrityProof, Effect.gen(function*() {
    const branches = yield* Branches
    const objects = yield* ContentObjects
    const chunks = yield* ChunkStore

    const capture = (repoId: string, depth: number | null, branch: string | null, selectedBranch: string | null) =>
      Effect.map(branches.list(repoId), (rows) => captureOf(rows, depth, branch, selectedBranch))

    const prove = Effect.fnUntraced(function*(repo: { readonly id: string; readonly orgId: string }, request: ProofRequest) {
      const captured = yield* capture(repo.id, request.depth, request.branch, request.selectedBranch)
      const findings: Array<Finding> = []
      let headAffected = false
      // The commits of the scope.
      const scope: Array<{ hash: string; manifest: string }> = []
      const missingCommits: Array<string> = []
      if (request.depth !== null) {
        let next = captured.head
        while (next !== null && scope.length < request.depth) {
          const commit = (yield* objects.loadCommitHeaders(repo.id, [next])).get(next)
          if (commit === undefined || !commit.published) {
            missingCommits.push(next)
            break
          }
          scope.push({ hash: commit.hash, manifest: commit.manifest_hash })
          next = commit.parent_hash
        }
      } else {
        const seen = new Set<string>()
        let frontier = [...captured.roots]
        while (frontier.length > 0) {
          const wanted = frontier.filter((h) => !seen.has(h))
          for (const h of wanted) seen.add(h)
          const loaded = yield* objects.loadCommitHeaders(repo.id, wanted)
          const next: Array<string> = []
          for (const h of wanted) {
            const commit = loaded.get(h)
            if (commit === undefined || !commit.published) {
              missingCommits.push(h)
              continue
            }
            scope.push({ hash: commit.hash, manifest: commit.manifest_hash })
            for (const p of [commit.parent_hash, commit.merge_parent_hash]) if (p !== null) next.push(p)
          }
          frontier = next
        }
      }
      for (const hash of missingCommits) {
        if (hash === captured.head) headAffected = true
        findings.push({ code: "missing_commit", commit_hash: hash, recoverability: recoverability("missing_commit"), detail: `commit ${hash} is referenced but not stored` })
      }

      // Their trees, breadth first, and where each blob first appears.
      const affected = new Map<string, Array<{ commit: string; path: string }>>()
      const headBlobs = new Set<string>()
      const manifests = new Set(scope.map((c) => c.manifest))
      const treesDone = new Set<string>()
      for (const commit of scope) {
        if (!manifests.has(commit.manifest)) continue
        manifests.delete(commit.manifest)
        let frontier: Array<{ hash: string; dir: string }> = [{ hash: commit.manifest, dir: "" }]
        const isHead = commit.hash === captured.head
        while (frontier.length > 0) {
          // A tree seen under another commit is not walked again, except for the head (its blobs decide head_affected).
          const todo = frontier.filter((t) => t.hash !== EMPTY_TREE && (isHead || !treesDone.has(t.hash)))
          const loaded = yield* objects.loadTrees(repo.orgId, todo.map((t) => t.hash))
          const next: Array<{ hash: string; dir: string }> = []
          for (const { hash, dir } of todo) {
            treesDone.add(hash)
            const entries = loaded.get(hash)
            if (entries === undefined) {
              if (isHead) headAffected = true
              findings.push({
                code: "missing_tree",
                commit_hash: commit.hash,
                tree_hash: hash,
                recoverability: recoverability("missing_tree"),
                detail: `tree ${hash} reachable from commit ${commit.hash} is not stored`
              })
              continue
            }
            for (const e of entries) {
              const path = dir === "" ? e.name : `${dir}/${e.name}`
              if (e.kind === "tree") {
                if (request.cone === undefined || SparseCone.reachesCone(request.cone, path)) next.push({ hash: e.hash, dir: path })
                continue
              }
              if (request.withheld.has(e.hash)) continue
              if (request.cone !== undefined && !SparseCone.inCone(request.cone, path)) continue
              if (isHead) headBlobs.add(e.hash)
              const at = affected.get(e.hash) ?? []
              if (at.length < MAX_AFFECTED) at.push({ commit: commit.hash, path })
              affected.set(e.hash, at)
            }
          }
          frontier = next
        }
      }
      if (request.blob !== null && !request.withheld.has(request.blob) && !affected.has(request.blob)) affected.set(request.blob, [])

      // The blobs, then their chunks.
      const hashes = [...affected.keys()]
      const info = new Map<string, BlobInfo>()
      for (let i = 0; i < hashes.length; i += 5000) {
        for (const [h, b] of yield* objects.blobInfo(repo.orgId, hashes.slice(i, i + 5000))) info.set(h, b)
      }
      const allChunks = [...new Set([...info.values()].flatMap((b) => b.chunks.map((c) => c.hash)))]
      const stored = request.verification === "metadata" ? new Map<string, number>() : new Map(yield* chunks.sizes(repo.orgId, allChunks))
      let verifiedChunkCount = 0
      let verifiedByteCount = 0
      let budgetExhausted = false
      const blobEvidence: Array<Record<string, unknown>> = []
      for (const hash of hashes) {
        const blob = info.get(hash)
        const empty = hash === Blake3.EMPTY_HASH
        let problem: [string, string] | undefined
        const chunkEvidence: Array<Record<string, unknown>> = (blob?.chunks ?? []).map((c) => ({ hash: c.hash, offset: c.offset, size: c.size, metadata_present: true }))
        if (blob === undefined && !empty) problem = ["missing_blob", `blob ${hash} is not stored`]
        if (blob !== undefined && request.verification !== "metadata") {
          for (const [i, c] of blob.chunks.entries()) {
            const present = stored.get(c.hash) === c.size
            chunkEvidence[i]!["object_present"] = present
            if (!present && problem === undefined) problem = ["missing_chunk", `chunk ${c.hash} of blob ${hash} is not stored`]
          }
        }
        // With a requested blob (`oak blob info`) only that one is re-hashed: the others' chunks are checked for existence.
        const rehash = request.verification === "bytes" && (request.blob === null || request.blob === hash)
        if (blob !== undefined && rehash && problem === undefined && !budgetExhausted) {
          const over = (request.maxChunks !== null && verifiedChunkCount + blob.chunks.length > request.maxChunks) ||
            (request.maxBytes !== null && verifiedByteCount + blob.size > request.maxBytes)
          if (over) {
            budgetExhausted = true
            problem = ["verification_budget_exhausted", `byte verification budget ran out before blob ${hash}`]
          } else {
            const verified = (yield* Blake3.hashStream(readChunks(chunks, repo.orgId, blob.chunks))).hash === hash
            verifiedChunkCount += blob.chunks.length
            verifiedByteCount += blob.size
            for (const e of chunkEvidence) e["hash_verified"] = verified
            if (!verified) problem = ["blob_hash_mismatch", `stored bytes for blob ${hash} do not hash to ${hash}`]
          }
        }
        const at = affected.get(hash) ?? []
        if (problem !== undefined) {
          if (headBlobs.has(hash)) headAffected = true
          const [code, detail] = problem
          findings.push({
            code,
            blob_hash: hash,
            affected: at,
            recoverability: recoverability(code),
            detail: at[0] === undefined ? detail : `${detail} (at ${at[0].path})`
          })
        }
        if (hash === request.blob) {
          blobEvidence.push({ hash, metadata_present: blob !== undefined || empty, mapping_present: blob !== undefined || empty, chunks: chunkEvidence, affected: at })
        }
      }
      return {
        capture: captured,
        commitCount: scope.length,
        manifestCount: new Set(scope.map((c) => c.manifest)).size,
        blobCount: hashes.length,
        chunkCount: allChunks.length,
        verifiedChunkCount,
        verifiedByteCount,
        findings,
        blobEvidence,
        headAffected,
        budgetExhausted
      } satisfies Proof
    })

    return IntegrityProof.of({ capture, prove })
  }))
}
