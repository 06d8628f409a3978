/**
 * The integrity protocol the Oak client runs before a clone (and `oak doctor`, `oak blob info`):
 * `integrity/capabilities` says which proof profile the server offers and whether the presented
 * key was accepted; `integrity` proves the content a clone of a scope (branch, depth, paths) will
 * need is stored, and pins that scope's branch heads in a snapshot token the pull then checks.
 */
import * as Names from "@grove/core/Names"
import * as SparseCone from "@grove/core/objects/SparseCone"
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { BadRequest, Forbidden, NotFound, PreconditionFailed, ServiceUnavailable, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"

// Each parameter's own rule, so the document says what the server enforces; an empty value is an absent one.
// What no schema of independent parameters can say stays the handler's (400): expected_head needs
// selected_branch, which needs proof_profile=bounded_v1, which excludes blob.

/** One of `words`, or empty. */
const Word = (what: string, words: ReadonlyArray<string>) => Schema.optionalKey(F.Word(what, ["", ...words]))

/** A count in decimal digits (at most 15), at least `min`; or empty. */
const Count = (what: string, min: 0 | 1) =>
  Schema.optionalKey(P.make({
    check: (value) =>
      value === "" || (/^[0-9]{1,15}$/.test(value) && Number(value) >= min)
        ? { ok: true }
        : { ok: false, reason: `${what} must be an integer of at least ${min}` },
    description: `${what}: an integer of at least ${min}, in decimal digits; empty or absent for none.`,
    pattern: min === 0 ? "^[0-9]{0,15}$" : "^(?:|(?!0+$)[0-9]{1,15})$",
    minLength: 0,
    maxLength: 15,
    exact: true
  }))

const MAX_BRANCH = 1024
const Branch = (what: string) =>
  Schema.optionalKey(P.make({
    check: (value) =>
      value.length <= MAX_BRANCH && !Names.hasControlCharacters(value)
        ? { ok: true }
        : { ok: false, reason: `${what} must be a branch name without control characters` },
    description: `${what}: a branch name; empty or absent for none.`,
    pattern: `^[^\\u0000-\\u001f\\u007f-\\u009f]{0,${MAX_BRANCH}}$`,
    minLength: 0,
    maxLength: MAX_BRANCH,
    exact: true
  }))

const HashOrEmpty = (what: string) =>
  Schema.optionalKey(P.make({
    check: (value) => value === "" || Names.HASH_PATTERN.test(value) ? { ok: true } : { ok: false, reason: `${what} must be a hash: 64 lowercase hex characters` },
    description: `${what}: 64 lowercase hex characters; empty or absent for none.`,
    pattern: "^(?:|[0-9a-f]{64})$",
    minLength: 0,
    maxLength: 64,
    exact: true
  }))

const Paths = Schema.optionalKey(P.make({
  check: (value) => {
    const cone = SparseCone.parseCone(value)
    return cone.ok ? { ok: true } : { ok: false, reason: cone.reason }
  },
  description: "Comma-separated path prefixes of a sparse clone: no control characters, no '.' or '..' segments.",
  pattern: "^[^\\u0000-\\u001f\\u007f-\\u009f]*$",
  minLength: 0,
  // One prefix of the longest (SparseCone.MAX_PREFIX_BYTES, in ASCII), well within what a request line may carry.
  maxLength: SparseCone.MAX_PREFIX_BYTES,
  // Counts and byte lengths per prefix, and the dot segments, are the check's.
  exact: false
}))

export const IntegrityQuery = {
  /** "metadata" (default), "existence" (every chunk stored) or "bytes" (every blob re-hashed). */
  verify: Word("verify", ["metadata", "existence", "bytes"]),
  /** Commits of history from the head, at least 1; absent for all of it. */
  depth: Count("depth", 1),
  blob: HashOrEmpty("blob"),
  branch: Branch("branch"),
  selected_branch: Branch("selected_branch"),
  expected_head: HashOrEmpty("expected_head"),
  paths: Paths,
  max_chunks: Count("max_chunks", 0),
  max_bytes: Count("max_bytes", 0),
  proof_profile: Word("proof_profile", ["bounded_v1", "unbounded"]),
  sparse_materialization_protocol: Word("sparse_materialization_protocol", ["cone_v1"]),
  known_loss_protocol: Word("known_loss_protocol", ["report_v1"])
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
