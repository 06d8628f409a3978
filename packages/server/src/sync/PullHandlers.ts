/**
 * The sync protocol's reads of history: `pull` (a branch's commits, trees and blobs, or what is new since a
 * commit) and `commits/info`; every read goes straight to the database.
 */
import { ApiErrors, ApiPullCompact, type ApiSync, CurrentCaller, GroveApi } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as SparseCone from "@grove/core/objects/SparseCone"
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { toBranchData } from "../content/BranchRecord.ts"
import { Branches } from "../content/Branches.ts"
import { type CommitRow, toCommitData } from "../content/ContentObjects.ts"
import { History } from "../content/History.ts"
import { MAIN_BRANCH } from "../content/PushPreparation.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { captureOf, checkSelected, snapshotProblem } from "../integrity/IntegritySnapshot.ts"
import { callerPolicy, withheldIn } from "../path-permissions/CallerPolicy.ts"
import { readableRepository, toBlobData } from "./SyncWire.ts"

/** Both forms: the answer depends on Accept, so a shared cache must not hand the compact one to a plain reader. */
const BY_ACCEPT = { vary: "accept" }

/**
 * A pull's answer as JSON, without the endpoint's schema encoding: every field of a PullResponse is a plain JSON value
 * built field by field (toBranchData, toCommitData, toTreeData, toBlobData), so encoding changed nothing and only
 * walked it (a 5,000-file clone: 2.8 MB; ~15-20 of ~150 ms of server CPU per pull, with the garbage it left).
 * With `compact` (the caller's Accept asked for it), Grove's compact answer (api's PullCompact: 1.2 MB for that clone).
 * It leaves out a list equal to PullCompact.canonicalFiles, which clients rebuild with theirs: that algorithm is
 * frozen for compact_v1 (a change needs compact_v2).
 */
export const pullJson = (answer: ApiSync.PullResponse, compact = false) =>
  compact
    ? HttpServerResponse.text(JSON.stringify(ApiPullCompact.compact(answer)), { contentType: ApiPullCompact.CONTENT_TYPE, headers: BY_ACCEPT })
    : HttpServerResponse.text(JSON.stringify(answer), { contentType: "application/json", headers: BY_ACCEPT })

const conflict = (error: string, code: string) => Effect.fail(new ApiErrors.Conflict({ error, code }))

export const pullHandlers = Effect.gen(function*() {
  const history = yield* History
  const branches = yield* Branches
  const readable = readableRepository(yield* Authorizer)

  const pull = HttpApiBuilder.handler(GroveApi, "sync", "pull", Effect.fn("Sync.pull")(function*({ params, query, request }) {
    const repo = yield* readable(params.owner, params.name)
    const target = query.branch_name ?? MAIN_BRANCH
    const force = query.force === "true" || query.force === "1"
    // Decimal digits only: Number() would also take "1e3", "0x10" and " " (as 0).
    const depth = query.depth === undefined || query.depth === "" ? 0 : /^[0-9]{1,15}$/.test(query.depth) ? Number(query.depth) : NaN
    if (!Number.isSafeInteger(depth) || depth < 0) {
      return yield* new ApiErrors.BadRequest({ error: "depth must be a non-negative integer", code: "invalid_input" })
    }
    const cone = SparseCone.parseCone(query.paths ?? "")
    if (!cone.ok) return yield* new ApiErrors.BadRequest({ error: cone.reason, code: "invalid_paths" })
    if (query.since !== undefined && query.since !== "" && !Blake3.isHash(query.since)) {
      return yield* new ApiErrors.BadRequest({ error: "since must be a commit hash", code: "invalid_hash" })
    }
    const rows = yield* dbUnavailable(branches.list(repo.id))
    // A clone's preflight pin: the scope it proved must be the one asked for, with the same heads (else 412).
    const selectedBranch = query.selected_branch ?? null
    const expectedHead = query.expected_head ?? null
    if (query.integrity_snapshot !== undefined || selectedBranch !== null) {
      if (query.integrity_snapshot === undefined) {
        return yield* new ApiErrors.PreconditionFailed({ error: "selected_branch requires an integrity snapshot precondition", code: "snapshot_required" })
      }
      const scopeDepth = depth > 0 ? depth : null
      const captured = captureOf(rows, scopeDepth, query.branch_name ?? null, selectedBranch)
      yield* checkSelected(selectedBranch, expectedHead, captured.selected)
      const problem = snapshotProblem(query.integrity_snapshot, {
        depth: scopeDepth,
        branch: query.branch_name ?? null,
        paths: query.paths ?? null,
        selectedBranch,
        expectedHead
      }, captured)
      if (problem === "invalid") return yield* new ApiErrors.BadRequest({ error: "invalid integrity snapshot", code: "invalid_input" })
      if (problem !== undefined) return yield* new ApiErrors.PreconditionFailed({ error: problem, code: "snapshot_changed" })
    }
    const branch = rows.find((b) => b.name === target)
    // In the schema's order (head first): the answer is the same text as the endpoint's encoding would give.
    const base = { branch: branch === undefined ? null : toBranchData(branch), branches: rows.map(toBranchData) }
    const head = branch?.head ?? null
    // A full clone of a selected branch also needs that branch's own commits (after the target's: parents first).
    const selectedHead = selectedBranch === null || selectedBranch === target || depth > 0
      ? null
      : rows.find((b) => b.name === selectedBranch)?.head ?? null
    const compact = ApiPullCompact.acceptsCompact(request.headers["accept"])
    if (head === null && selectedHead === null) {
      // Nothing to leave out, but in the form asked for: a client reads the form from the answer's content type.
      return pullJson({ head: null, ...base, commits: [], blobs: [], trees: [] }, compact)
    }

    let commits: ReadonlyArray<CommitRow> = []
    if (head === null) {
      // The target is empty: only the selected branch's commits.
    } else if (depth > 0) {
      commits = (yield* dbUnavailable(history.firstParentChain(repo.id, head, depth))).reverse()
    } else {
      let since = query.since === undefined || query.since === "" ? undefined : query.since
      if (since !== undefined) {
        const published = yield* dbUnavailable(history.publishedCommits(repo.id, [since]))
        if (!published.has(since)) {
          if (!force) {
            return yield* conflict(
              "Conflict detected: local has commits not in remote history. Push your changes first.",
              "since_unpublished"
            )
          }
          since = undefined
        } else if (!(yield* dbUnavailable(history.isOnFirstParentChain(repo.id, head, since)))) {
          if (!force) {
            return yield* conflict(
              `branch '${target}' was rewritten (force-pushed) since ${since}. Use a forced pull to take the server's history.`,
              "branch_rewritten"
            )
          }
          since = undefined
        }
      }
      const all = yield* dbUnavailable(history.branchCommits(repo.id, target, head))
      if (since === undefined) commits = all
      else {
        // Drop `since` and everything before it.
        const byHash = new Map(all.map((c) => [c.hash, c]))
        const before = new Set<string>()
        const stack = [since]
        for (let h = stack.pop(); h !== undefined; h = stack.pop()) {
          if (before.has(h)) continue
          before.add(h)
          const c = byHash.get(h)
          if (c !== undefined) for (const p of [c.parent_hash, c.merge_parent_hash]) if (p !== null) stack.push(p)
        }
        commits = all.filter((c) => !before.has(c.hash))
      }
    }
    if (selectedHead !== null) {
      const have = new Set(commits.map((c) => c.hash))
      const extra = (yield* dbUnavailable(history.branchCommits(repo.id, selectedBranch!, selectedHead))).filter((c) => !have.has(c.hash))
      commits = [...commits, ...extra]
    }
    const reach = yield* dbUnavailable(history.reachable(repo.orgId, commits.map((c) => c.manifest_hash), true))
    // A sparse pull (`paths`): every tree, so manifests verify, but only the blobs inside the cone.
    const inCone = cone.prefixes === undefined
      ? undefined
      : SparseCone.blobsInCone(cone.prefixes, commits.map((c) => c.manifest_hash), reach.trees)
    // Trees are sent whole; blobs at paths the caller may not read are withheld and named.
    const policy = yield* callerPolicy(yield* CurrentCaller, repo)
    const withheld = yield* withheldIn(policy, repo.orgId, commits.map((c) => c.manifest_hash))
    return pullJson({
      head,
      ...base,
      commits: commits.map(toCommitData),
      blobs: reach.blobs.filter((b) => !withheld.has(b.hash) && (inCone === undefined || inCone.has(b.hash))).map(toBlobData),
      trees: [...reach.trees],
      ...(withheld.size === 0 ? {} : { restricted_blobs: [...withheld].sort() })
    }, compact)
  }))
  const commitsInfo = HttpApiBuilder.handler(GroveApi, "sync", "commitsInfo", Effect.fnUntraced(function*({ params, payload }) {
    const repo = yield* readable(params.owner, params.name)
    const found = yield* dbUnavailable(history.publishedCommits(repo.id, payload.hashes))
    const commits = payload.hashes.flatMap((h) => {
      const c = found.get(h)
      return c === undefined ? [] : [c]
    })
    if (payload.metadata_only === true) return { commits: commits.map(toCommitData), trees: [] }
    const reach = yield* dbUnavailable(history.reachable(repo.orgId, commits.map((c) => c.manifest_hash), false))
    return { commits: commits.map(toCommitData), trees: [...reach.trees] }
  }))
  return { pull, commitsInfo }
})
