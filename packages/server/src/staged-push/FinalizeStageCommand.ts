/**
 * Finishing a staged push is a Branch entity command (`FinalizeStage`), so it is serialized with
 * the branch's pushes: in one transaction it locks the stage and the branch, checks the head is
 * still exactly the stage's expected head (the compare-and-set), checks the target reaches that
 * boundary and every commit of the stage and nothing unpublished outside it, then publishes the
 * stage's commits, accounts what they reach, moves the head and closes the stage.
 */
import { ApiSync } from "@grove/api"
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { load as loadRepository, splitBranchKey } from "../entities/CommandSupport.ts"
import {
  BranchError,
  BranchRepositoryGone,
  BranchStateInvalid,
  loadBranch,
  MainProtected,
  moveHead,
  publishPrepared
} from "../content/BranchCommands.ts"
import { sameBoundary, stageColumns, TOMBSTONE_DAYS, toStageRow } from "./PushStages.ts"

/** No open stage of that id: never opened, collected, or bound to someone else (400). */
export class StageMissing extends Schema.TaggedError<StageMissing>()("StageMissing", { stageId: Schema.String }) {}
/** The request does not fit the stage (400): another boundary, a target outside it, a history that does not connect. */
export class StageInvalid extends Schema.TaggedError<StageInvalid>()("StageInvalid", { message: Schema.String, code: Schema.String }) {}
/** The stage was aborted (409). */
export class StageAborted extends Schema.TaggedError<StageAborted>()("StageAborted", { stageId: Schema.String }) {}

export const FinalizeError = Schema.Union([...BranchError.members, StageMissing, StageInvalid, StageAborted])
export type FinalizeError = typeof FinalizeError.Type

export const FinalizePayload = Schema.Struct({
  stageId: Schema.String,
  principal: Schema.String,
  branchIdentity: Schema.String,
  expectedHead: Schema.NullOr(Schema.String),
  force: Schema.Boolean,
  target: Schema.String,
  branch: ApiSync.BranchData,
  actor: Schema.String
})

const CONFLICT_MESSAGE = "Conflict: staged session boundary changed"

const invalid = (message: string, code = "stage_invalid") => new StageInvalid({ message, code })

const finalize = Effect.fn("Branch.finalizeStage")(function*(payload: typeof FinalizePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const [repoKey, name] = splitBranchKey(entityId)
  const repo = yield* loadRepository(repoKey)
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: repoKey })
  if (name === "main") return yield* new MainProtected({ branch: name })
  const rows = yield* sql<Parameters<typeof toStageRow>[0]>`SELECT ${stageColumns(sql)} FROM push_stages
    WHERE repo_id = ${repo.id} AND stage_id = ${payload.stageId} FOR UPDATE`
  const stage = rows[0] === undefined ? undefined : toStageRow(rows[0])
  const boundary = { ...payload, branch: name }
  if (stage === undefined || stage.principal !== payload.principal) return yield* new StageMissing({ stageId: payload.stageId })
  if (!sameBoundary(stage, boundary)) return yield* invalid("stage_id is already bound to a different branch boundary", "stage_mismatch")
  if (stage.state === "completed") {
    // A replayed finalizer (its answer was lost) gets the same answer; anything else is refused.
    if (stage.completedTarget === payload.target) return { success: true, new_head: payload.target, message: "already finalized" }
    return yield* invalid("a completed stage accepts only an exact finalization replay", "stage_completed")
  }
  if (stage.state === "aborted") return yield* new StageAborted({ stageId: payload.stageId })

  const current = yield* loadBranch(repo.id, name)
  if (current?.status === "merged") {
    return yield* new BranchStateInvalid({ branch: name, message: `branch '${name}' was merged; start a new branch from main`, code: "branch_merged" })
  }
  const head = current?.head ?? null
  if (head !== payload.expectedHead) return { success: false, new_head: head, message: CONFLICT_MESSAGE }

  // The stage's commits, and the history from the target down to the boundary.
  const commits = yield* sql<{ hash: string; parent_hash: string | null; merge_parent_hash: string | null }>`
    SELECT c.hash, c.parent_hash, c.merge_parent_hash FROM push_stage_objects o
    JOIN commits c ON c.repo_id = o.repo_id AND c.hash = o.hash
    WHERE o.repo_id = ${repo.id} AND o.stage_id = ${payload.stageId} AND o.kind = 'commit'`
  const byHash = new Map(commits.map((c) => [c.hash, c]))
  if (!byHash.has(payload.target)) return yield* invalid(`target head ${payload.target} is not a commit of this stage`, "target_not_staged")
  const reached = new Set<string>()
  const outside = new Set<string>()
  let boundaryReached = payload.expectedHead === null
  const stack = [payload.target]
  for (let h = stack.pop(); h !== undefined; h = stack.pop()) {
    if (h === payload.expectedHead) {
      boundaryReached = true
      continue
    }
    if (reached.has(h) || outside.has(h)) continue
    const c = byHash.get(h)
    if (c === undefined) {
      outside.add(h)
      continue
    }
    reached.add(h)
    for (const p of [c.parent_hash, c.merge_parent_hash]) if (p !== null) stack.push(p)
  }
  if (reached.size !== byHash.size) {
    return yield* invalid("the target head does not reach every commit of this stage", "stage_unreachable")
  }
  if (!payload.force && !boundaryReached) {
    return yield* invalid(`the target head does not descend from the expected head ${payload.expectedHead}`, "stage_not_descendant")
  }
  // Parents outside the stage are published commits of this repository (a force may start anywhere published).
  if (outside.size > 0) {
    const published = yield* sql<{ hash: string }>`SELECT hash FROM commits
      WHERE repo_id = ${repo.id} AND published AND hash = ANY(${[...outside]}::text[])`
    const ok = new Set(published.map((r) => r.hash))
    const missing = [...outside].find((h) => !ok.has(h))
    if (missing !== undefined) return yield* invalid(`parent commit ${missing} is neither in the stage nor published`, "missing_parent")
  }

  const owned = yield* sql<{ kind: string; hash: string }>`SELECT kind, hash FROM push_stage_objects
    WHERE repo_id = ${repo.id} AND stage_id = ${payload.stageId} AND kind <> 'commit'`
  yield* sql`UPDATE commits SET published = true WHERE repo_id = ${repo.id} AND hash = ANY(${[...byHash.keys()]}::text[]) AND NOT published`
  yield* publishPrepared(repo, {
    trees: owned.filter((o) => o.kind === "tree").map((o) => o.hash),
    blobs: owned.filter((o) => o.kind === "blob").map((o) => o.hash)
  })
  const moved = yield* moveHead(repo, name, current, payload.target, payload.branch, payload.actor)
  yield* sql`UPDATE push_stages SET state = 'completed', completed_target = ${payload.target}, version = version + 1,
    updated_at = now(), expires_at = now() + make_interval(days => ${TOMBSTONE_DAYS})
    WHERE repo_id = ${repo.id} AND stage_id = ${payload.stageId} AND version = ${stage.version}`
  yield* sql`DELETE FROM push_stage_objects WHERE repo_id = ${repo.id} AND stage_id = ${payload.stageId}`
  return moved
})

export const commands = {
  FinalizeStage: { payload: FinalizePayload, success: ApiSync.PushResponse, error: FinalizeError }
} as const

export const handlers = { FinalizeStage: finalize }
