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

export class MergesGroup extends HttpApiGroup.make("merges").add(
  HttpApiEndpoint.post("merge", "/:owner/:name/branches/:branch/merge", {
    params: { owner: Schema.String, name: Schema.String, branch: Schema.String },
    query: { force: Schema.optionalKey(Schema.String) },
    success: MergeResult,
    error: [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PreconditionFailed, PayloadTooLarge, OperationPending, ServiceUnavailable]
  })
) {}
