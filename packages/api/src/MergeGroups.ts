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

const LandErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, OperationPending, ServiceUnavailable] as const

export class MergesGroup extends HttpApiGroup.make("merges").add(
  HttpApiEndpoint.post("merge", "/:owner/:name/branches/:branch/merge", {
    params: P.OwnerRepoBranch,
    query: { force: Schema.optionalKey(Schema.String) },
    success: MergeResult,
    error: [...LandErrors, PreconditionFailed]
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
