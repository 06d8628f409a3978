/**
 * The Branch entity (key `owner/name:branch`, in its repository's partition, so
 * a repository's branch commands and repository commands run one at a time).
 * A push moves the head with a compare-and-set in one transaction that also
 * publishes the pushed commits, records what the repository now references
 * (size accounting and the organization's quota) and appends the outbox event.
 */
import { ApiSync } from "@grove/api"
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { plannedFor } from "../db/Batches.ts"
import { emit, load as loadRepository, splitBranchKey } from "../entities/CommandSupport.ts"
import type { RepositoryRecord } from "../access/RepositoryRecord.ts"
import { branchColumns, type BranchRecord, toApiBranch } from "./BranchRecord.ts"
import { lockReferenced, ObjectsMissing } from "./ReferencedObjects.ts"

export { ObjectsMissing } from "./ReferencedObjects.ts"

export class BranchRepositoryGone extends Schema.TaggedError<BranchRepositoryGone>()("BranchRepositoryGone", {
  fullName: Schema.String
}) {}
export class BranchNotFound extends Schema.TaggedError<BranchNotFound>()("BranchNotFound", { branch: Schema.String }) {}
export class BranchExists extends Schema.TaggedError<BranchExists>()("BranchExists", { branch: Schema.String }) {}
/** The branch is not in a state that allows the command (merged, not closed, main). */
export class BranchStateInvalid extends Schema.TaggedError<BranchStateInvalid>()("BranchStateInvalid", {
  branch: Schema.String,
  message: Schema.String,
  code: Schema.String
}) {}
export class MainProtected extends Schema.TaggedError<MainProtected>()("MainProtected", { branch: Schema.String }) {}
export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded", {
  owner: Schema.String,
  usedBytes: Schema.Number,
  quotaBytes: Schema.Number,
  neededBytes: Schema.Number
}) {}
/** A parent outside the push is not (or no longer) published. */
export class ParentUnpublished extends Schema.TaggedError<ParentUnpublished>()("ParentUnpublished", {
  commit: Schema.String
}) {}

export const BranchError = Schema.Union([
  BranchRepositoryGone,
  BranchNotFound,
  BranchExists,
  BranchStateInvalid,
  MainProtected,
  QuotaExceeded,
  ParentUnpublished,
  ObjectsMissing
])
export type BranchError = typeof BranchError.Type

const Actor = { actor: Schema.String }

export const PushPayload = Schema.Struct({
  /** Rows of `staged_pushes` holding the new trees and blobs (too many for one bus message). */
  stagedId: Schema.NullOr(Schema.String),
  commits: Schema.Array(Schema.String),
  tip: Schema.NullOr(Schema.String),
  force: Schema.Boolean,
  branch: Schema.NullOr(ApiSync.BranchData),
  ...Actor
})
export const CreatePayload = Schema.Struct({
  description: Schema.NullOr(Schema.String),
  parentBranch: Schema.String,
  ...Actor
})
export const ClosePayload = Schema.Struct({ reason: Schema.NullOr(Schema.String), ...Actor })
export const ReopenPayload = Schema.Struct({ ...Actor })

export const branchKey = (repositoryKey: string, branch: string) => `${repositoryKey}:${branch}`


export const nowRfc3339 = () => new Date().toISOString().replace("Z", "+00:00")

export const loadBranch = Effect.fnUntraced(function*(repoId: string, name: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<BranchRecord>`SELECT ${branchColumns(sql)} FROM branches WHERE repo_id = ${repoId} AND name = ${name} FOR UPDATE`
  return rows[0]
})

const requireRepository = Effect.fnUntraced(function*(entityId: string) {
  const [repoKey] = splitBranchKey(entityId)
  const repo = yield* loadRepository(repoKey)
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: repoKey })
  return repo
})

/** Changes a loaded branch with a compare-and-set on its version. */
const updateBranch = Effect.fnUntraced(function*(current: BranchRecord, changes: ReturnType<SqlClient.SqlClient["update"]>) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<BranchRecord>`UPDATE branches SET ${changes}, updated_at = now(), version = version + 1
    WHERE repo_id = ${current.repoId} AND name = ${current.name} AND version = ${current.version}
    RETURNING ${branchColumns(sql)}`
  // The row is locked FOR UPDATE in this transaction, so a lost compare-and-set is a bug in the caller: retry the command.
  if (rows.length === 0) return yield* Effect.die(new Error(`branch ${current.name} changed under its own command`))
  return rows[0]!
})

/**
 * The object lists a push left in `staged_pushes` for its command (taken: the row goes with this transaction).
 * The row is gone only when gc dropped it, a grace period after the push's preparation: what it listed may be
 * gone too, so the push is refused (retryable) rather than published without its objects.
 */
export const takeStaged = Effect.fnUntraced(function*(repoId: string, stagedId: string | null) {
  const sql = yield* SqlClient.SqlClient
  if (stagedId === null) return { trees: [], blobs: [] }
  const rows = yield* sql<{ body: unknown }>`DELETE FROM staged_pushes WHERE id = ${stagedId} AND repo_id = ${repoId} RETURNING body`
  const body = rows[0]?.body
  if (body === undefined) {
    return yield* new ObjectsMissing({ message: "the push waited longer than garbage collection's grace period: its object list was dropped" })
  }
  return (typeof body === "string" ? JSON.parse(body) : body) as { trees: ReadonlyArray<string>; blobs: ReadonlyArray<string> }
})

/** Whether the repository reaches no blob, its row locked (FOR NO KEY UPDATE) before the look, which is a statement of its own. */
const reachesNoBlob = Effect.fnUntraced(function*(repoId: string) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`SELECT 1 FROM repositories WHERE id = ${repoId} FOR NO KEY UPDATE`
  const [row] = yield* sql<{ reached: boolean }>`SELECT EXISTS (SELECT 1 FROM repo_blobs WHERE repo_id = ${repoId}) AS reached`
  return row?.reached === false
})

/**
 * What the newly published commits reach: repository rows for access and size, organization rows for the quota.
 * The quota is checked on the chunks that become referenced for the first time in the organization.
 */
export const account = Effect.fnUntraced(function*(
  repo: RepositoryRecord,
  body: { readonly trees: ReadonlyArray<string>; readonly blobs: ReadonlyArray<string> },
  /** The bytes of every blob of `body.blobs` (each once), when the caller knows them: the size needs no lookup if all are new here. */
  blobBytes?: number
) {
  const sql = yield* SqlClient.SqlClient
  if (body.trees.length > 0) {
    yield* plannedFor(body.trees.length, sql`INSERT INTO repo_trees (repo_id, tree_hash) SELECT ${repo.id}, unnest(${[...body.trees]}::text[]) ON CONFLICT DO NOTHING`)
  }
  if (body.blobs.length === 0) return
  const blobs = [...new Set(body.blobs)]
  // A repository that reaches no blob yet (its first push of files) has no row the new ones could conflict with:
  // they go in without ON CONFLICT's speculative insertion (5,000 rows: 57 -> 39 ms of PGlite CPU). Its row is
  // locked first, as the size update below locks it, so another publish to it waits and then sees these rows.
  // The two paths take their locks in opposite orders (the row, then repo_blobs; repo_blobs, then the row's update):
  // safe because account runs only inside a branch's entity command, and a repository's branches share one partition,
  // whose commands run one at a time. Calling it from anywhere else would need one order.
  const first = blobs.length > 100 && (yield* reachesNoBlob(repo.id))
  const added = yield* plannedFor(blobs.length, first
    ? sql<{ blob_hash: string }>`INSERT INTO repo_blobs (repo_id, blob_hash) SELECT ${repo.id}, unnest(${blobs}::text[]) RETURNING blob_hash`
    : sql<{ blob_hash: string }>`INSERT INTO repo_blobs (repo_id, blob_hash)
    SELECT ${repo.id}, unnest(${blobs}::text[]) ON CONFLICT DO NOTHING RETURNING blob_hash`)
  if (added.length === 0) return
  const addedHashes = added.map((r) => r.blob_hash)
  if (blobBytes !== undefined && addedHashes.length === blobs.length) {
    yield* sql`UPDATE repositories SET size_bytes = size_bytes + ${blobBytes}, object_count = object_count + ${addedHashes.length}
      WHERE id = ${repo.id}`
  } else {
    yield* plannedFor(addedHashes.length, sql`UPDATE repositories SET
      size_bytes = size_bytes + (SELECT coalesce(sum(size), 0) FROM blobs WHERE org_id = ${repo.orgId} AND hash = ANY(${addedHashes}::text[])),
      object_count = object_count + ${addedHashes.length}
      WHERE id = ${repo.id}`)
  }
  // The chunks of the blobs this repository reaches for the first time, not yet referenced in the organization,
  // now count. Only the chunks' `referenced` mark counts: a blob is referenced exactly when its chunks
  // are (a chunk never goes back to unreferenced, and is not swept while a blob maps it), so a mark on blobs only
  // narrowed this lookup, at the cost of rewriting each new blob row (5,000 per 5k-file first push). The column
  // stays one release for the previous version's nodes in a rolling upgrade (see migration 0018); never read it.
  // The chunks' hashes as one array (an InitPlan), then one index scan of chunks by (org_id, hash = ANY): no join
  // for the planner to get wrong. As `hash IN (SELECT ...)`, with statistics taken before a new organization's
  // rows arrived, it was a nested loop over both sides (4.7 s for a 5k-file push instead of ~0.1 s).
  const chunks = yield* plannedFor(addedHashes.length, sql<{ size: string }>`UPDATE chunks SET referenced = true
    WHERE org_id = ${repo.orgId} AND NOT referenced AND hash = ANY(ARRAY(
      SELECT chunk_hash FROM blob_chunks WHERE org_id = ${repo.orgId} AND blob_hash = ANY(${addedHashes}::text[])))
    RETURNING size::text AS size`)
  const needed = chunks.reduce((sum, c) => sum + Number(c.size), 0)
  if (needed === 0) return
  const charged = yield* sql`UPDATE organizations SET used_bytes = used_bytes + ${needed}
    WHERE id = ${repo.orgId} AND used_bytes + ${needed} <= quota_bytes RETURNING id`
  if (charged.length === 0) {
    const org = yield* sql<{ used: string; quota: string }>`SELECT used_bytes::text AS used, quota_bytes::text AS quota
      FROM organizations WHERE id = ${repo.orgId}`
    return yield* new QuotaExceeded({
      owner: repo.owner,
      usedBytes: Number(org[0]?.used ?? 0),
      quotaBytes: Number(org[0]?.quota ?? 0),
      neededBytes: needed
    })
  }
})

/**
 * `account` for objects a push prepared before its command: every blob made reachable, and its chunks,
 * checked stored and locked until the commit first (ReferencedObjects), then accounted.
 */
export const publishPrepared = Effect.fnUntraced(function*(
  repo: RepositoryRecord,
  body: { readonly trees: ReadonlyArray<string>; readonly blobs: ReadonlyArray<string> }
) {
  yield* account(repo, body, yield* lockReferenced(repo.orgId, body.blobs))
})

const CONFLICT_MESSAGE = "Conflict: remote head has changed. Pull first."

export const push = Effect.fn("Branch.push")(function*(payload: typeof PushPayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* requireRepository(entityId)
  const [, name] = splitBranchKey(entityId)
  if (name === "main") return yield* new MainProtected({ branch: name })
  const current = yield* loadBranch(repo.id, name)
  if (current?.status === "merged") {
    return yield* new BranchStateInvalid({
      branch: name,
      message: `branch '${name}' was merged; start a new branch from main`,
      code: "branch_merged"
    })
  }
  const meta = payload.branch
  const description = meta?.description ?? current?.description ?? null

  // Metadata only: description, and open -> closed (closed -> open is ignored on this path).
  if (payload.commits.length === 0) {
    const closing = meta?.status === "closed"
    if (current === undefined) {
      const created = yield* sql<BranchRecord>`INSERT INTO branches ${
        sql.insert({
          repo_id: repo.id,
          name,
          description,
          parent_branch: meta?.parent_branch ?? "main",
          status: closing ? "closed" : "open",
          close_reason: closing ? meta?.close_reason ?? null : null,
          created_by: payload.actor,
          created_at: meta?.created_at ?? nowRfc3339()
        })
      } RETURNING ${branchColumns(sql)}`
      return { success: true, new_head: created[0]!.head, message: "ok" }
    }
    const changes: Record<string, unknown> = {}
    if (meta?.description != null && meta.description !== current.description) changes.description = meta.description
    if (closing) {
      if (current.status === "open") changes.status = "closed"
      if ((meta?.close_reason ?? null) !== current.closeReason) changes.close_reason = meta?.close_reason ?? null
    }
    const updated = Object.keys(changes).length === 0 ? current : yield* updateBranch(current, sql.update(changes))
    return { success: true, new_head: updated.head, message: "ok" }
  }

  // Compare-and-set on the head: empty branch, fast-forward from the head, or a replay that contains the head.
  const serverHead = current?.head ?? null
  const pushed = new Set(payload.commits)
  const rows = yield* sql<{ hash: string; parent_hash: string | null; merge_parent_hash: string | null }>`
    SELECT hash, parent_hash, merge_parent_hash FROM commits WHERE repo_id = ${repo.id} AND hash = ANY(${[...pushed]}::text[])`
  if (rows.length !== pushed.size) return yield* Effect.die(new Error("pushed commits were not staged before the push command"))
  const chainStarts = rows.filter((c) => c.parent_hash === null || !pushed.has(c.parent_hash))
  const accepted = payload.force || serverHead === null || pushed.has(serverHead) ||
    chainStarts.some((c) => c.parent_hash === serverHead)
  if (!accepted) {
    // Nothing is published: the objects the push staged stay unreferenced, its staging row goes.
    if (payload.stagedId !== null) yield* sql`DELETE FROM staged_pushes WHERE id = ${payload.stagedId}`
    return { success: false, new_head: serverHead, message: CONFLICT_MESSAGE }
  }

  // Parents outside the push must be published (checked again here: the edge's check ran before this command).
  const external = [...new Set(rows.flatMap((c) => [c.parent_hash, c.merge_parent_hash]).filter((h): h is string => h !== null && !pushed.has(h)))]
  if (external.length > 0) {
    const published = yield* sql<{ hash: string }>`SELECT hash FROM commits
      WHERE repo_id = ${repo.id} AND published AND hash = ANY(${external}::text[])`
    const ok = new Set(published.map((r) => r.hash))
    const missing = external.find((h) => !ok.has(h))
    if (missing !== undefined) return yield* new ParentUnpublished({ commit: missing })
  }
  yield* sql`UPDATE commits SET published = true WHERE repo_id = ${repo.id} AND hash = ANY(${[...pushed]}::text[]) AND NOT published`
  yield* publishPrepared(repo, yield* takeStaged(repo.id, payload.stagedId))

  return yield* moveHead(repo, name, current, payload.tip!, meta, payload.actor)
})

/**
 * Moves (or creates) the branch's head to `tip` after the caller's compare-and-set held and the commits were
 * published, and appends the push (or branch.created) event. Shared by pushes and staged pushes.
 */
export const moveHead = Effect.fnUntraced(function*(
  repo: RepositoryRecord,
  name: string,
  current: BranchRecord | undefined,
  tip: string,
  meta: ApiSync.BranchData | null,
  actor: string
) {
  const sql = yield* SqlClient.SqlClient
  const serverHead = current?.head ?? null
  const description = meta?.description ?? current?.description ?? null
  const firstPush = current === undefined || current.pushedAt === null
  if (current === undefined) {
    yield* sql`INSERT INTO branches ${
      sql.insert({
        repo_id: repo.id,
        name,
        description,
        parent_branch: meta?.parent_branch ?? "main",
        status: meta?.status === "closed" ? "closed" : "open",
        close_reason: meta?.status === "closed" ? meta.close_reason ?? null : null,
        head: tip,
        created_by: actor,
        created_at: meta?.created_at ?? nowRfc3339(),
        pushed_at: new Date()
      })
    }`
  } else {
    const changes: Record<string, unknown> = { head: tip }
    if (meta?.description != null) changes.description = meta.description
    if (current.pushedAt === null) changes.pushed_at = new Date()
    yield* updateBranch(current, sql.update(changes))
  }
  // Every change of the row bumps its version: a record is as new as its version (caches compare them).
  yield* sql`UPDATE repositories SET updated_at = now(), version = version + 1 WHERE id = ${repo.id}`
  if (tip !== serverHead) {
    yield* emit(firstPush ? "branch.created" : "push", {
      event: firstPush ? "branch.created" : "push",
      repository_id: repo.id,
      owner: repo.owner,
      repo: repo.name,
      branch: name,
      commit: tip,
      pusher: actor,
      timestamp: new Date().toISOString()
    })
  }
  return { success: true, new_head: tip, message: "ok" }
})

export const create = Effect.fn("Branch.create")(function*(payload: typeof CreatePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* requireRepository(entityId)
  const [, name] = splitBranchKey(entityId)
  if ((yield* loadBranch(repo.id, name)) !== undefined) return yield* new BranchExists({ branch: name })
  const parent = yield* loadBranch(repo.id, payload.parentBranch)
  if (parent === undefined) return yield* new BranchNotFound({ branch: payload.parentBranch })
  // A new branch starts at its parent's head, so the first push fast-forwards from there.
  const rows = yield* sql<BranchRecord>`INSERT INTO branches ${
    sql.insert({
      repo_id: repo.id,
      name,
      description: payload.description,
      parent_branch: payload.parentBranch,
      status: "open",
      head: parent.head,
      created_by: payload.actor,
      created_at: nowRfc3339()
    })
  } RETURNING ${branchColumns(sql)}`
  return toApiBranch(rows[0]!)
})

export const close = Effect.fn("Branch.close")(function*(payload: typeof ClosePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* requireRepository(entityId)
  const [, name] = splitBranchKey(entityId)
  if (name === "main") {
    return yield* new BranchStateInvalid({ branch: name, message: "main cannot be closed", code: "main_protected" })
  }
  const current = yield* loadBranch(repo.id, name)
  if (current === undefined) return yield* new BranchNotFound({ branch: name })
  // Idempotent: closing a closed (or merged) branch answers its record unchanged.
  if (current.status !== "open") return toApiBranch(current)
  return toApiBranch(yield* updateBranch(current, sql.update({ status: "closed", close_reason: payload.reason })))
})

export const reopen = Effect.fn("Branch.reopen")(function*(_payload: typeof ReopenPayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* requireRepository(entityId)
  const [, name] = splitBranchKey(entityId)
  const current = yield* loadBranch(repo.id, name)
  if (current === undefined) return yield* new BranchNotFound({ branch: name })
  if (current.status === "merged") {
    return yield* new BranchStateInvalid({ branch: name, message: `branch '${name}' was merged and cannot be reopened`, code: "branch_merged" })
  }
  if (current.status === "open") {
    return yield* new BranchStateInvalid({ branch: name, message: `branch '${name}' is not closed`, code: "branch_open" })
  }
  return toApiBranch(yield* updateBranch(current, sql.update({ status: "open", close_reason: null })))
})

/** The branch's own slice of the Branch entity; `Entities.ts` composes the entity from the slices. */
export const commands = {
  Push: { payload: PushPayload, success: ApiSync.PushResponse, error: BranchError },
  Create: { payload: CreatePayload, success: ApiSync.Branch, error: BranchError },
  Close: { payload: ClosePayload, success: ApiSync.Branch, error: BranchError },
  Reopen: { payload: ReopenPayload, success: ApiSync.Branch, error: BranchError }
} as const

export const handlers = { Push: push, Create: create, Close: close, Reopen: reopen }
