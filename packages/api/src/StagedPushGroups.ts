/**
 * Staged pushes and blob mapping proofs: the Oak client's `staged_v1` push protocol with
 * `async_v1` mapping proofs, for pushes too large for one request (more than 128 new blobs,
 * 64 MiB of blob bytes, 500 commits or 10,000 chunk references).
 *
 * A push is one stage (`stage_id`, chosen by the client): batches (`finalize: false`) carry
 * blobs, then trees, then commits; each is verified and stored without moving anything; the
 * finalizer (`finalize: true`, no objects, `target_head`) publishes them all and moves the branch
 * from `expected_branch_head` to `target_head` in one compare-and-set. A chunked blob in a batch
 * names a blob proof: its chunk list, declared and paged in beforehand, checked by re-hashing.
 *
 * A caller has at most 8 stages open per repository (429 `too_many_stages` past that). Open stages
 * are listed by `GET push/staged-v1`: one's own, or, for the repository's admins, everyone's.
 */
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { BadRequest, Conflict, Forbidden, NotFound, OperationPending, PayloadTooLarge, ServiceUnavailable, TooManyRequests, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"
import * as S from "./Sync.ts"

/** A stage id or proof token: 16-128 ASCII letters, digits, '-' and '_'. */
export const OpaqueId = F.OpaqueId

/** A field that must be present; null means "no head" (an empty branch). */
const HeadOrNull = Schema.NullOr(P.Hash)

export const StagedPushRequest = Schema.Struct({
  stage_id: OpaqueId,
  expected_branch_head: HeadOrNull,
  branch: S.PushBranch,
  finalize: Schema.Boolean,
  force: Schema.optionalKey(Schema.Boolean),
  target_head: Schema.optionalKey(Schema.NullOr(P.Hash)),
  commits: Schema.Array(S.PushCommit),
  blobs: Schema.Array(S.PushBlob),
  trees: Schema.optionalKey(Schema.Array(S.PushTree))
})
export type StagedPushRequest = typeof StagedPushRequest.Type

export const StagedAbortRequest = Schema.Struct({ branch_name: P.BranchName, expected_branch_head: HeadOrNull })
export const StagedAbortResponse = Schema.Struct({
  aborted: Schema.Boolean,
  /** "aborted", or "missing" when no such stage is open. */
  state: Schema.String
})

/**
 * An open stage, as `GET push/staged-v1` lists it: a caller sees their own; the repository's admins
 * (and its organization's owners) see everyone's, and may abort any of them with `branch` and
 * `expected_branch_head` as the abort's boundary.
 */
export const OpenStage = Schema.Struct({
  stage_id: Schema.String,
  /** Who opened it: a user name, or `service:<name>` for a service account. */
  caller: Schema.String,
  branch: Schema.String,
  expected_branch_head: Schema.NullOr(Schema.String),
  /** Commits its batches admitted so far. */
  commit_count: Schema.Int,
  created_at: Schema.String,
  /** The last batch; the stage is collected 24 hours after it (`expires_at`). */
  updated_at: Schema.String,
  expires_at: Schema.String
})
export const OpenStages = Schema.Struct({ stages: Schema.Array(OpenStage) })

const U32 = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 4_294_967_295 }))
const U64 = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

export const BlobProofDescriptor = Schema.Struct({
  hash: P.Hash,
  size: U64,
  /** BLAKE3 of the ordered chunk list: per chunk, u64 BE index, u64 BE offset, u32 BE size, the hash's hex. */
  mapping_digest: P.Hash,
  total_chunks: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 131_072 }))
})
export type BlobProofDescriptor = typeof BlobProofDescriptor.Type
/** 1 to 128 blobs of distinct hashes, at most 131,072 chunk references and 25 GiB in all (the last three: 400). */
export const BlobProofRequest = Schema.Struct({ blobs: Schema.Array(BlobProofDescriptor).check(Schema.isMinLength(1), Schema.isMaxLength(128)) })

export const BlobProofChunk = Schema.Struct({ hash: P.Hash, offset: U64, size: U32 })
export type BlobProofChunk = typeof BlobProofChunk.Type
export const BlobProofPagesRequest = Schema.Struct({
  pages: Schema.Array(Schema.Struct({ blob_index: U32, first_chunk_index: U32, chunks: Schema.Array(BlobProofChunk) }))
})
export const BlobProofPagesResponse = Schema.Struct({
  accepted_chunks: U32,
  complete_blobs: Schema.Array(U32),
  all_mappings_complete: Schema.Boolean
})
export type BlobProofPagesResponse = typeof BlobProofPagesResponse.Type

/**
 * A proof's state. Complete (200): `verified` and `missing` name every declared blob and
 * `proof_token` is set when nothing is missing. Pending (202): `mapping_proof_job` says what it
 * waits for (`uploading` the chunk list, `running` the check); poll `GET blobs/proofs/{token}`.
 */
export const BlobProofResponse = Schema.Struct({
  verified: Schema.Array(Schema.String),
  missing: Schema.Array(Schema.String),
  proof_token: Schema.optionalKey(Schema.String),
  mapping_proof_job: Schema.optionalKey(Schema.Struct({
    token: Schema.String,
    status: Schema.Literals(["uploading", "running", "complete"]),
    retry_after_ms: Schema.Int
  }))
})
export type BlobProofResponse = typeof BlobProofResponse.Type

const Owner = P.OwnerRepo
const Stage = { ...P.OwnerRepo, stage_id: OpaqueId }
const Proof = { ...P.OwnerRepo, token: OpaqueId }
const Errors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, TooManyRequests, OperationPending, ServiceUnavailable] as const
/** Proofs send no command, so never OperationPending (whose 202 would collide with a pending proof's). */
const ProofErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, TooManyRequests, ServiceUnavailable] as const
const Pending = BlobProofResponse.pipe(HttpApiSchema.status(202))

export class StagedPushGroup extends HttpApiGroup.make("stagedPush").add(
  HttpApiEndpoint.post("stage", "/:owner/:name/push/staged-v1", {
    params: Owner,
    payload: StagedPushRequest,
    success: S.PushResponse,
    error: Errors
  }),
  HttpApiEndpoint.get("list", "/:owner/:name/push/staged-v1", {
    params: Owner,
    query: F.Page,
    success: OpenStages,
    error: [BadRequest, Unauthorized, Forbidden, NotFound, ServiceUnavailable]
  }),
  HttpApiEndpoint.post("abort", "/:owner/:name/push/staged-v1/:stage_id/abort", {
    params: Stage,
    payload: StagedAbortRequest,
    success: StagedAbortResponse,
    error: Errors
  }),
  HttpApiEndpoint.post("createProof", "/:owner/:name/blobs/proofs/async-v1", {
    params: Owner,
    payload: BlobProofRequest,
    success: [BlobProofResponse, Pending],
    error: ProofErrors
  }),
  HttpApiEndpoint.put("proofPages", "/:owner/:name/blobs/proofs/:token/mappings", {
    params: Proof,
    payload: BlobProofPagesRequest,
    success: BlobProofPagesResponse,
    error: ProofErrors
  }),
  HttpApiEndpoint.post("finalizeProof", "/:owner/:name/blobs/proofs/:token/finalize", {
    params: Proof,
    payload: Schema.Struct({}),
    success: [BlobProofResponse, Pending],
    error: ProofErrors
  }),
  HttpApiEndpoint.get("proof", "/:owner/:name/blobs/proofs/:token", {
    params: Proof,
    success: [BlobProofResponse, Pending],
    error: ProofErrors
  })
  // The Oak client may send fields this version does not know: ignored, as in the sync group.
).annotate(HttpApi.PayloadParseOptions, {}) {}
