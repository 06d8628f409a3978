/**
 * How `main` changes: squash merges of branches (and, with issue 4, syncs and
 * reverts), each serialized per repository by the Repository entity.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import {
  BadRequest,
  Conflict,
  Forbidden,
  NotFound,
  OperationPending,
  PayloadTooLarge,
  PreconditionFailed,
  ServiceUnavailable,
  Unauthorized
} from "./Errors.ts"
import * as P from "./Params.ts"
import { FileChangeData } from "./Sync.ts"

export const MergeResult = Schema.Struct({
  /** The squash commit's message: the branch description (or its name). */
  message: Schema.String,
  /** The new squash commit on main. */
  commit_hash: Schema.String,
  manifest_hash: Schema.String,
  /** main's previous head; absent for the first merge. */
  parent_hash: Schema.optionalKey(Schema.String),
  /** The merged branch's tip. */
  merge_parent_hash: Schema.String
})
export type MergeResult = typeof MergeResult.Type

export const SyncResult = Schema.Struct({
  branch: Schema.String,
  /** False when the branch already contained its parent's head (nothing to do). */
  synced: Schema.Boolean,
  head: Schema.NullOr(Schema.String),
  /** The new commit on the branch; its merge parent is the parent's head. */
  commit_hash: Schema.optionalKey(Schema.String),
  merge_parent_hash: Schema.optionalKey(Schema.String)
})

export const RevertResult = Schema.Struct({
  branch: Schema.String,
  commit_hash: Schema.String,
  parent_hash: Schema.String,
  reverted_hash: Schema.String,
  message: Schema.String
})

/**
 * What merging a branch would do now, computed without writing anything (`grove branch list|show`,
 * `grove diff BRANCH`): the merge base with main, whether the squash merge would land, the CI gate at
 * the head, the branch's own commits (newest first, at most 100) and the files it changes since the base.
 */
export const MergePreview = Schema.Struct({
  branch: Schema.String,
  head: Schema.NullOr(Schema.String),
  main_head: Schema.NullOr(Schema.String),
  merge_base: Schema.NullOr(Schema.String),
  /** `clean`: it would merge (CI aside); `conflicts` (see `conflict_paths`); `no_changes`; `not_mergeable` (see `reason`). */
  merge: Schema.Literals(["clean", "conflicts", "no_changes", "not_mergeable"]),
  reason: Schema.optionalKey(Schema.String),
  conflict_paths: Schema.Array(Schema.String),
  /** The merge gate's view of the head's runs: `none` ran, all `passed`, some `running`, some `failing`. */
  ci: Schema.Struct({ state: Schema.Literals(["none", "passed", "running", "failing"]), workflows: Schema.Array(Schema.String) }),
  commits: Schema.Array(Schema.Struct({ hash: Schema.String, author: Schema.String, timestamp: Schema.String, message: Schema.NullOr(Schema.String), files: Schema.Number })),
  files: Schema.Array(FileChangeData)
})
export type MergePreview = typeof MergePreview.Type

const LandErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, OperationPending, ServiceUnavailable] as const

export class MergesGroup extends HttpApiGroup.make("merges").add(
  HttpApiEndpoint.post("merge", "/:owner/:name/branches/:branch/merge", {
    params: P.OwnerRepoBranch,
    query: { force: Schema.optionalKey(Schema.String) },
    success: MergeResult,
    error: [...LandErrors, PreconditionFailed]
  }),
  HttpApiEndpoint.get("preview", "/:owner/:name/branches/:branch/merge-preview", {
    params: P.OwnerRepoBranch,
    success: MergePreview,
    error: [BadRequest, Unauthorized, Forbidden, NotFound, ServiceUnavailable]
  }),
  HttpApiEndpoint.post("sync", "/:owner/:name/branches/:branch/sync", {
    params: P.OwnerRepoBranch,
    success: SyncResult,
    error: LandErrors
  }),
  HttpApiEndpoint.post("revert", "/:owner/:name/commits/:hash/revert", {
    params: { ...P.OwnerRepo, hash: P.Hash },
    success: RevertResult,
    error: LandErrors
  })
) {}
