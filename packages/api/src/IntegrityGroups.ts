/**
 * The integrity protocol the Oak client runs before a clone (and `oak doctor`, `oak blob info`):
 * `integrity/capabilities` says which proof profile the server offers and whether the presented
 * key was accepted; `integrity` proves the content a clone of a scope (branch, depth, paths) will
 * need is stored, and pins that scope's branch heads in a snapshot token the pull then checks.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { BadRequest, Forbidden, NotFound, PreconditionFailed, ServiceUnavailable, Unauthorized } from "./Errors.ts"
import * as P from "./Params.ts"

const Text = Schema.optionalKey(Schema.String)

export const IntegrityQuery = {
  /** "metadata" (default), "existence" (every chunk stored) or "bytes" (every blob re-hashed). */
  verify: Text,
  depth: Text,
  blob: Text,
  branch: Text,
  selected_branch: Text,
  expected_head: Text,
  paths: Text,
  max_chunks: Text,
  max_bytes: Text,
  proof_profile: Text,
  sparse_materialization_protocol: Text,
  known_loss_protocol: Text
}

/** The report's fields follow the Oak client's IntegrityReport (schema_version 1). */
export const IntegrityReport = Schema.Record(Schema.String, Schema.Unknown)
export const IntegrityCapabilities = Schema.Struct({
  schema_version: Schema.Number,
  clone_preflight_profile: Schema.String,
  selected_branch_acquisition: Schema.String,
  sparse_materialization_protocol: Schema.String,
  credential_presented: Schema.Boolean,
  credential_accepted: Schema.Boolean
})

const Errors = [BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, ServiceUnavailable] as const

export class IntegrityGroup extends HttpApiGroup.make("integrity").add(
  HttpApiEndpoint.get("capabilities", "/:owner/:name/integrity/capabilities", {
    params: P.OwnerRepo,
    success: IntegrityCapabilities,
    error: Errors
  }),
  HttpApiEndpoint.get("report", "/:owner/:name/integrity", {
    params: P.OwnerRepo,
    query: IntegrityQuery,
    success: IntegrityReport,
    error: Errors
  })
) {}
