/**
 * Everything a push needs before its branch command runs, outside the entity's
 * one-at-a-time section: every tree, commit, blob and chunk re-hashed and
 * checked against the protocol's rules, then trees, blobs and (unpublished)
 * commits written. Nothing here moves a branch: a failure leaves at most
 * unreferenced objects behind, never a ref to something missing.
 */
import type { ApiSync } from "@grove/api"
import * as FastCdc from "@grove/core/chunking/FastCdc"
import * as Names from "@grove/core/Names"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Chunks from "@grove/core/objects/Chunks"
import * as Commit from "@grove/core/objects/Commit"
import * as FileChanges from "@grove/core/objects/FileChanges"
import * as Tree from "@grove/core/objects/Tree"
import { Effect, Schema } from "effect"
import { ChunkStore } from "./ChunkStore.ts"
import { readChunks } from "./ChunkReads.ts"
import { storeUploaded } from "./ChunkUploads.ts"
import { type BlobInfo, ContentObjects, type DedupScope } from "./ContentObjects.ts"
import { makeTreeCache, type TreeCache } from "./TreeCache.ts"

/** The push breaks a rule of the protocol; nothing was published. */
export class PushRejected extends Schema.TaggedError<PushRejected>()("PushRejected", {
  reason: Schema.String,
  code: Schema.String
}) {}

export const MAIN_BRANCH = "main"

/** Per-push limits; bodies are also capped by the HTTP layer. */
export const MAX_PUSH_COMMITS = 10_000
export const MAX_PUSH_TREES = 200_000
export const MAX_PUSH_BLOBS = 200_000

export interface PreparedPush {
  readonly branchName: string
  /** Pushed commit hashes, parents first; empty for a metadata-only push. */
  readonly commits: ReadonlyArray<string>
  /** The tip every pushed commit leads to. */
  readonly tip: string | null
  /**
   * Trees the pushed commits reach that the repository's published commits did not reach yet, and the blobs
   * they place at a path their parent does not have them at (the others the repository reaches already).
   */
  readonly newTrees: ReadonlyArray<string>
  readonly newBlobs: ReadonlyArray<string>
}

const reject = (reason: string, code = "invalid_push") => Effect.fail(new PushRejected({ reason, code }))

/** Why a tree holding `.grove` (Tree.isDotGrove) at any depth is refused, as git refuses `.git`; undefined when it holds none. */
const dotGroveEntry = (hash: string, entries: ReadonlyArray<Tree.TreeEntry>): string | undefined => {
  const reserved = entries.find((e) => Tree.isDotGrove(e.name))
  return reserved === undefined ? undefined
    : `tree ${hash} holds ${JSON.stringify(reserved.name)}, which a checkout takes for '.grove', where grove keeps a checkout's own files (refused at any depth)`
}

const toFileChange = (f: ApiSync.FileChangeData): FileChanges.FileChange => ({
  path: f.path,
  change_type: f.change_type as FileChanges.ChangeType,
  old_blob_hash: f.old_blob_hash ?? null,
  new_blob_hash: f.new_blob_hash ?? null,
  old_path: f.old_path ?? null,
  old_mode: (f.old_mode ?? null) as FileChanges.FileChange["old_mode"],
  new_mode: (f.new_mode ?? null) as FileChanges.FileChange["new_mode"]
})

/** Inline `content` is a JSON array of byte values. */
const inlineBytes = (content: ReadonlyArray<number>): Uint8Array | undefined => {
  const bytes = new Uint8Array(content.length)
  for (let i = 0; i < content.length; i++) {
    const v = content[i]!
    if (!Number.isInteger(v) || v < 0 || v > 255) return undefined
    bytes[i] = v
  }
  return bytes
}

/** The branch a push is about: `branch.name`, else the commits' branch. */
export const pushBranchName = (body: ApiSync.PushRequest): string | undefined => body.branch?.name ?? body.commits[0]?.branch_name

/** How a staged push's batch differs from a whole push (see staged-push/StagedPushHandlers). */
export interface StagedBatch {
  /** Commits earlier batches of the same stage admitted: parents that need not be published. */
  readonly stagedCommits: ReadonlySet<string>
}

/**
 * The blobs each pushed manifest places at a path `canRead` allows, and at a path it does not. A subtree
 * (or file) that its parent commit has at the same path is skipped: the parent is published or pushed
 * with it (and checked), so the same bytes at the same path grant nothing new. One load per tree level.
 */
const blobsByPath = Effect.fnUntraced(function*(
  cache: TreeCache,
  pairs: ReadonlyArray<{ readonly root: string; readonly parentRoot: string | null }>,
  canRead: (path: string) => boolean
) {
  const readable = new Set<string>()
  const hidden = new Set<string>()
  const seen = new Set<string>()
  let level: Array<{ hash: string; base: string | undefined; prefix: string }> = pairs
    .filter((p) => p.root !== p.parentRoot)
    .map((p) => ({ hash: p.root, base: p.parentRoot ?? undefined, prefix: "" }))
  while (level.length > 0) {
    yield* cache.load(level.flatMap((t) => t.base === undefined ? [t.hash] : [t.hash, t.base]))
    const next: typeof level = []
    for (const { base, hash, prefix } of level) {
      const key = `${hash}\u0000${base ?? ""}\u0000${prefix}`
      if (seen.has(key)) continue
      seen.add(key)
      const before = new Map((base === undefined ? [] : cache.get(base) ?? []).map((e) => [e.name, e]))
      for (const e of cache.get(hash) ?? []) {
        const old = before.get(e.name)
        if (old !== undefined && old.kind === e.kind && old.hash === e.hash) continue
        const path = `${prefix}${e.name}`
        if (e.kind === "tree") next.push({ hash: e.hash, base: old?.kind === "tree" ? old.hash : undefined, prefix: `${path}/` })
        else (canRead(path) ? readable : hidden).add(e.hash)
      }
    }
    level = next
  }
  return { readable, hidden }
})

export const preparePush = Effect.fn("PushPreparation.preparePush")(function*(
  repo: { readonly id: string; readonly orgId: string },
  body: ApiSync.PushRequest,
  /** What counts as already there for this caller: objects it cannot read must be in the push (or uploaded by it). */
  scope: DedupScope,
  /** A batch of a staged push: its commits need not have one tip (the finalizer checks the whole stage's). */
  staged?: StagedBatch
) {
  const objects = yield* ContentObjects
  const chunkStore = yield* ChunkStore
  /** Chunks the caller uploaded here with a fresh grant: granted already (recordUploads would leave them so). */
  const freshlyGranted = new Set<string>()
  /**
   * Sizes of the stored chunks that count as present for this caller: first those it just uploaded here (what a
   * push's chunks mostly are, one lookup each), then the rest through chunk sizes and `present`.
   */
  const presentChunkSizes = Effect.fnUntraced(function*(hashes: ReadonlyArray<string>, askedFresh = false) {
    const found = askedFresh ? new Map<string, number>() : yield* objects.freshChunkUploads(scope, hashes)
    for (const h of found.keys()) freshlyGranted.add(h)
    const rest = hashes.filter((h) => !found.has(h))
    if (rest.length === 0) return found
    const stored = yield* chunkStore.sizes(repo.orgId, rest)
    const visible = yield* objects.present("chunk", scope, [...stored.keys()], true)
    for (const [h, size] of stored) if (visible.has(h)) found.set(h, size)
    return found
  })
  const expected = body.expected_head ?? null
  if (expected !== null && !Blake3.isHash(expected)) {
    return yield* reject("expected_head must be null or a commit hash: 64 lowercase hex characters", "invalid_hash")
  }
  const branchName = pushBranchName(body)
  if (branchName === undefined) return yield* reject("a push names its branch (branch.name) or carries commits")
  // The rule for a branch name a request creates, the same as POST /branches': stricter than the commit
  // hash's (no control character, bounded, no surrounding whitespace, not HEAD or refs/...), so whatever a
  // push creates can be named in a path and in git.
  const nameCheck = Names.checkNewBranchName(branchName)
  if (!nameCheck.ok) return yield* reject(nameCheck.reason, "invalid_branch")
  if (body.commits.length > MAX_PUSH_COMMITS) return yield* reject(`at most ${MAX_PUSH_COMMITS} commits per push`, "too_large")
  if ((body.trees?.length ?? 0) > MAX_PUSH_TREES) return yield* reject(`at most ${MAX_PUSH_TREES} trees per push`, "too_large")
  if (body.blobs.length > MAX_PUSH_BLOBS) return yield* reject(`at most ${MAX_PUSH_BLOBS} blobs per push`, "too_large")

  // Trees: canonical entries that hash to the claimed hash.
  const cache = makeTreeCache(objects, repo.orgId)
  const pushedTrees: Array<{ hash: string; body: string; entries: ReadonlyArray<Tree.TreeEntry> }> = []
  for (const t of body.trees ?? []) {
    const entries = t.entries as ReadonlyArray<Tree.TreeEntry>
    const check = Tree.checkTree({ hash: t.hash, entries })
    if (!check.ok) return yield* reject(check.reason, "invalid_tree")
    const reserved = dotGroveEntry(t.hash, entries)
    if (reserved !== undefined) return yield* reject(reserved, "invalid_tree")
    cache.add(t.hash, entries)
    // Canonical order, as a stored tree loads: kept for later pushes once stored (RememberedTrees).
    const sorted = Tree.sortEntries(entries).map((e) => ({ name: e.name, kind: e.kind, hash: e.hash, mode: e.mode }))
    pushedTrees.push({ hash: t.hash, body: Tree.encodeSortedTree(sorted), entries: sorted })
  }

  // Commits: fields and hash, one branch, parents before children, parents outside the push already published.
  const index = new Map<string, number>()
  const pushedHashes = new Set(body.commits.map((c) => c.hash))
  const external = new Set<string>()
  for (const [i, c] of body.commits.entries()) {
    const check = Commit.checkCommit({ ...c, parent_hash: c.parent_hash ?? null })
    if (!check.ok) return yield* reject(check.reason, "invalid_commit")
    if (c.branch_name !== branchName) {
      return yield* reject(`commit ${c.hash} is on branch '${c.branch_name}', the push is for '${branchName}'`, "invalid_commit")
    }
    if (index.has(c.hash)) return yield* reject(`commit ${c.hash} is pushed twice`, "invalid_commit")
    for (const parent of [c.parent_hash ?? null, c.merge_parent_hash ?? null]) {
      if (parent === null) continue
      if (!index.has(parent)) {
        // A set, not a scan of the push per such parent (7,500 commits each merging one outside the push: 0.8 s).
        if (pushedHashes.has(parent)) {
          return yield* reject(`commit ${c.hash} comes before its parent ${parent}: send parents first`, "invalid_commit")
        }
        external.add(parent)
      }
    }
    index.set(c.hash, i)
  }
  const externalRows = yield* objects.loadCommitHeaders(repo.id, [...external])
  for (const parent of external) {
    if (staged?.stagedCommits.has(parent) === true && externalRows.has(parent)) continue
    if (externalRows.get(parent)?.published !== true) {
      return yield* reject(`parent commit ${parent} is neither in the push nor published in this repository`, "missing_parent")
    }
  }
  const tip = body.commits.at(-1)?.hash ?? null
  if (tip !== null && staged === undefined) {
    // Exactly one tip: every pushed commit is an ancestor of the last one.
    const byHash = new Map(body.commits.map((c) => [c.hash, c]))
    const reached = new Set<string>()
    const stack = [tip]
    for (let h = stack.pop(); h !== undefined; h = stack.pop()) {
      if (reached.has(h)) continue
      reached.add(h)
      const c = byHash.get(h)
      if (c === undefined) continue
      for (const p of [c.parent_hash, c.merge_parent_hash]) if (p != null && byHash.has(p)) stack.push(p)
    }
    if (reached.size !== body.commits.length) {
      return yield* reject("every pushed commit must be an ancestor of the last one (one tip)", "invalid_commit")
    }
  }

  // Closure: every tree the commits reach is pushed or stored; collect what is new to this repository.
  const newTrees = new Set<string>()
  let frontier = [...new Set(body.commits.map((c) => c.manifest_hash))]
  // What the walk can meet going down pushed trees (the roots, the pushed trees and their subtrees) is asked
  // about in one query, not one per level: a one-file push six directories deep asked seven times.
  const reachable = new Set<string>()
  for (const stack = [...frontier]; stack.length > 0;) {
    const h = stack.pop()!
    if (reachable.has(h)) continue
    reachable.add(h)
    for (const e of cache.get(h) ?? []) if (e.kind === "tree") stack.push(e.hash)
  }
  const knownReachable = yield* objects.repoTrees(repo.id, [...reachable])
  const visited = new Set<string>()
  while (frontier.length > 0) {
    const candidates = frontier.filter((h) => !visited.has(h))
    for (const h of candidates) visited.add(h)
    const beyond = candidates.filter((h) => !reachable.has(h))
    const knownBeyond = beyond.length === 0 ? new Set<string>() : yield* objects.repoTrees(repo.id, beyond)
    const known = { has: (h: string) => knownReachable.has(h) || knownBeyond.has(h) }
    const todo = candidates.filter((h) => !known.has(h))
    // A tree the push does not carry counts only if the caller can read it already: dedup never grants access.
    const unpushed = todo.filter((h) => cache.get(h) === undefined)
    const visible = yield* objects.present("tree", scope, unpushed)
    yield* cache.load(unpushed.filter((h) => visible.has(h)))
    // Held by the organization, stored before `.grove` was refused below the root: checked as a pushed tree.
    for (const h of unpushed) {
      const reserved = dotGroveEntry(h, cache.get(h) ?? [])
      if (reserved !== undefined) return yield* reject(reserved, "invalid_tree")
    }
    const next: Array<string> = []
    for (const h of todo) {
      const entries = cache.get(h)
      if (entries === undefined) return yield* reject(`tree ${h} is missing: push it with the commit`, "missing_tree")
      newTrees.add(h)
      for (const e of entries) if (e.kind === "tree") next.push(e.hash)
    }
    frontier = next
  }

  // No commit's root holds `.grove` in any spelling a checkout's file system takes for it (Tree.isDotGrove, what
  // the client refuses to check out): a checkout keeps its config there, so a cloner's next push would go where the
  // tree's author chose. Every tree new to the repository was checked above at any depth; a stored one the push
  // reuses as a root may hold one still (stored before), so roots the push does not carry are read too. Before
  // anything is stored. A subtree this repository stores already is not read again, by design (a push reads only
  // what is new to it): a new tree may still reach a `.grove` stored below one before the check (`docs` of a legacy
  // branch holding `docs/.grove`). No exact check is cheap (it reads every reused subtree, all the way down); the
  // client refuses to check such a tree out (reserved_path) and Landing refuses to merge it.
  yield* cache.load(body.commits.map((c) => c.manifest_hash))
  for (const c of body.commits) {
    const reserved = cache.get(c.manifest_hash)?.find((e) => Tree.isDotGrove(e.name))
    if (reserved !== undefined) {
      return yield* reject(
        `commit ${c.hash}: the root of its tree holds ${JSON.stringify(reserved.name)}, which a checkout takes for '.grove', where grove keeps the checkout's own files`,
        "invalid_tree"
      )
    }
  }

  // Each commit's files list agrees with its parent's manifest and its own (only differing paths are read).
  const manifestOf = (hash: string): string | undefined =>
    body.commits[index.get(hash) ?? -1]?.manifest_hash ?? externalRows.get(hash)?.manifest_hash
  for (const c of body.commits) {
    const files = c.files.map(toFileChange)
    const parentManifest = c.parent_hash == null ? null : manifestOf(c.parent_hash) ?? null
    const named = files.flatMap((f) => f.old_path == null ? [f.path] : [f.path, f.old_path])
    const diff = yield* cache.resolve((lookup) => TreeDiff.diffTrees(parentManifest, c.manifest_hash, lookup, named))
    if (!diff.ok) return yield* reject(diff.reason, "missing_tree")
    const agrees = FileChanges.checkFileChangesAgree(files, diff.before, diff.after)
    if (!agrees.ok) return yield* reject(`commit ${c.hash}: ${agrees.reason}`, "invalid_files")
  }

  // Blobs: inline bytes re-hashed (and chunked like a client would when large); chunk lists checked against stored chunks.
  const registrations: Array<BlobInfo> = []
  const pushedBlobs = new Set<string>()
  const inlineChunks: Array<{ hash: string; data: Uint8Array }> = []
  // One lookup for every chunk the pushed blobs map to (a push may carry 20,000 blobs).
  const have = yield* presentChunkSizes(body.blobs.flatMap((b) => (b.chunks ?? []).map((c) => c.hash)))
  for (const b of body.blobs) {
    if (!Blake3.isHash(b.hash)) return yield* reject("a blob hash must be 64 lowercase hex characters", "invalid_blob")
    const sizeCheck = Chunks.checkSize(b.size, `size of blob ${b.hash}`)
    if (!sizeCheck.ok) return yield* reject(sizeCheck.reason, "invalid_blob")
    pushedBlobs.add(b.hash)
    const chunks = b.chunks ?? []
    if (chunks.length > 0) {
      if (b.content.length > 0) return yield* reject(`blob ${b.hash} carries both content and chunks`, "invalid_blob")
      const mapping = Chunks.checkChunkMapping(b, chunks)
      if (!mapping.ok) return yield* reject(`blob ${b.hash}: ${mapping.reason}`, "invalid_blob")
      for (const c of chunks) {
        const size = have.get(c.hash)
        if (size === undefined) return yield* reject(`chunk ${c.hash} of blob ${b.hash} was not uploaded`, "missing_chunk")
        if (size !== c.size) return yield* reject(`chunk ${c.hash} of blob ${b.hash} has ${size} bytes, not ${c.size}`, "invalid_blob")
      }
      const only = chunks[0]!
      if (!(chunks.length === 1 && only.hash === b.hash)) {
        if ((yield* Blake3.hashStream(readChunks(chunkStore, repo.orgId, chunks))).hash !== b.hash) return yield* reject(`the chunks of blob ${b.hash} do not hash to it`, "invalid_blob")
      }
      registrations.push({ hash: b.hash, size: b.size, chunks })
      continue
    }
    const bytes = inlineBytes(b.content)
    if (bytes === undefined) return yield* reject(`content of blob ${b.hash} must be byte values 0-255`, "invalid_blob")
    if (bytes.length !== b.size) return yield* reject(`blob ${b.hash} has ${bytes.length} bytes of content, size says ${b.size}`, "invalid_blob")
    if (Blake3.hash(bytes) !== b.hash) return yield* reject(`the content of blob ${b.hash} does not hash to it`, "invalid_blob")
    const pieces = bytes.length < FastCdc.CHUNKING_THRESHOLD
      ? [{ offset: 0, length: bytes.length }]
      : FastCdc.boundaries(bytes)
    const refs: Array<BlobInfo["chunks"][number]> = []
    for (const piece of pieces) {
      const data = bytes.subarray(piece.offset, piece.offset + piece.length)
      const hash = pieces.length === 1 ? b.hash : Blake3.hash(data)
      inlineChunks.push({ hash, data })
      refs.push({ hash, offset: piece.offset, size: piece.length })
    }
    registrations.push({ hash: b.hash, size: b.size, chunks: refs })
  }

  // Granted as they are stored (the caller sent their bytes), whatever becomes of the push.
  yield* storeUploaded(repo.orgId, scope, inlineChunks)

  // Every referenced blob exists: pushed, stored, or a small blob uploaded as the one chunk carrying its hash.
  // Where path permissions withhold something from the caller, what counts is every blob a pushed commit places
  // at a path its parent does not have it at (a stored tree may be placed anew): one at a path the caller may
  // read must be one it can read already or uploads now; one only at paths it may not read may also be one the
  // repository has (kept as it is: nothing is granted).
  // Without path permissions the same walk still pays: a blob its parent has at the same path is stored and
  // already reached by the repository (the parent is published, or pushed and walked the same way), so a
  // one-file push checks and records the blobs it placed, not every sibling of the changed directories.
  const here = scope.restricted.find((r) => r.repoId === repo.id)
  const placed = yield* blobsByPath(
    cache,
    body.commits.map((c) => ({ root: c.manifest_hash, parentRoot: c.parent_hash == null ? null : manifestOf(c.parent_hash) ?? null })),
    here?.canRead ?? (() => true)
  )
  const checked = new Set([...placed.readable, ...placed.hidden])
  // A small blob the caller uploaded as the one chunk carrying its hash (what most of a push's blobs are) is
  // registered from its chunk without asking whether the blob is stored or visible: registering a stored blob
  // keeps its row, and its grant is the chunk's (one row per hash).
  const uploaded = yield* objects.freshChunkUploads(scope, [...checked].filter((h) => !pushedBlobs.has(h)))
  for (const [h, size] of uploaded) {
    if (size >= FastCdc.CHUNKING_THRESHOLD) continue
    freshlyGranted.add(h)
    registrations.push({ hash: h, size, chunks: [{ hash: h, offset: 0, size }] })
  }
  const unresolved = [...checked].filter((h) => !pushedBlobs.has(h) && !freshlyGranted.has(h))
  const storedBlobs = yield* objects.blobSizes(repo.orgId, unresolved)
  const visibleBlobs = yield* objects.present("blob", scope, [...storedBlobs.keys()], true)
  const hiddenOnly = [...placed.hidden].filter((h) => !placed.readable.has(h) && storedBlobs.has(h) && !visibleBlobs.has(h))
  const kept = hiddenOnly.length === 0 ? new Set<string>() : yield* objects.repoBlobs(repo.id, hiddenOnly)
  const implicit = unresolved.filter((h) => !visibleBlobs.has(h) && !kept.has(h))
  const chunkSizes = yield* presentChunkSizes(implicit, true)
  for (const h of implicit) {
    const size = chunkSizes.get(h)
    if (size === undefined || size >= FastCdc.CHUNKING_THRESHOLD) {
      return yield* reject(`blob ${h} is referenced by a pushed tree but was not uploaded`, "missing_blob")
    }
    registrations.push({ hash: h, size, chunks: [{ hash: h, offset: 0, size }] })
  }

  yield* objects.storeTrees(repo.orgId, pushedTrees)
  yield* objects.registerBlobs(repo.orgId, registrations)
  yield* objects.stageCommits(repo.id, body.commits)
  // What this push carried (or proved it could read) counts as present for this caller from now on:
  // an object-only push followed by the commit push, or a retried push, need not send it again.
  // (Those whose fresh grant this push found are granted already.)
  yield* objects.recordUploads(scope, [...pushedTrees.map((t) => t.hash), ...registrations.map((b) => b.hash)].filter((h) => !freshlyGranted.has(h)))
  const prepared: PreparedPush = {
    branchName,
    commits: body.commits.map((c) => c.hash),
    tip,
    newTrees: [...newTrees],
    newBlobs: [...checked]
  }
  return prepared
})
