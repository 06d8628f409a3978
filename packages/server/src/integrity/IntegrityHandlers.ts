/**
 * The integrity endpoints (contract: `@grove/api` IntegrityGroups), as the Oak client reads them
 * before a clone and for `oak doctor` / `oak blob info`. Reads, for anyone who can read the
 * repository; the proof itself is IntegrityProof's.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import * as Names from "@grove/core/Names"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as SparseCone from "@grove/core/objects/SparseCone"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { callerPolicy, withheldAtHeads } from "../path-permissions/CallerPolicy.ts"
import { IntegrityProof, type Verification } from "./IntegrityProof.ts"
import { checkSelected, encodeSnapshot } from "./IntegritySnapshot.ts"

export const PROOF_PROFILE = "bounded_v1"
export const SELECTED_BRANCH_ACQUISITION = "exact_head_v1"
export const SPARSE_MATERIALIZATION = "cone_v1"
export const KNOWN_LOSS = "report_v1"

const bad = (error: string) => Effect.fail(new ApiErrors.BadRequest({ error, code: "invalid_input" }))

const count = (value: string | undefined, what: string, min: number) => {
  if (value === undefined || value === "") return Effect.succeed(null)
  return /^[0-9]{1,15}$/.test(value) && Number(value) >= min ? Effect.succeed(Number(value)) : bad(`${what} must be an integer of at least ${min}`)
}

const branchName = (value: string | undefined, what: string) => {
  if (value === undefined) return Effect.succeed(null)
  return value === "" || Names.hasControlCharacters(value) || value.length > 1024
    ? bad(`${what} must be a branch name without control characters`)
    : Effect.succeed(value)
}

export const IntegrityHandlers = HttpApiBuilder.group(GroveApi, "integrity", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const proofs = yield* IntegrityProof

  return handlers.handleAll({
    capabilities: Effect.fn("Integrity.capabilities")(function*({ params, request }) {
      const caller = yield* CurrentCaller
      yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read"))
      // A key that does not work never gets here (401): one presented here was accepted.
      const presented = request.headers["authorization"] !== undefined
      return {
        schema_version: 1,
        clone_preflight_profile: PROOF_PROFILE,
        selected_branch_acquisition: SELECTED_BRANCH_ACQUISITION,
        sparse_materialization_protocol: SPARSE_MATERIALIZATION,
        credential_presented: presented,
        credential_accepted: presented && caller.principal.kind !== "anonymous"
      }
    }),

    report: Effect.fn("Integrity.report")(function*({ params, query: raw }) {
      // An empty parameter is an absent one.
      const query = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== "")) as typeof raw
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read"))
      const verification = (query.verify ?? "metadata") as Verification
      if (!["metadata", "existence", "bytes"].includes(verification)) return yield* bad("verify must be metadata, existence or bytes")
      const profile = query.proof_profile
      if (profile !== undefined && profile !== "unbounded" && profile !== PROOF_PROFILE) return yield* bad(`proof_profile must be ${PROOF_PROFILE} or unbounded`)
      const bounded = profile === PROOF_PROFILE
      const depth = yield* count(query.depth, "depth", 1)
      const maxChunks = yield* count(query.max_chunks, "max_chunks", 0)
      const maxBytes = yield* count(query.max_bytes, "max_bytes", 0)
      const branch = yield* branchName(query.branch, "branch")
      const selectedBranch = yield* branchName(query.selected_branch, "selected_branch")
      const expectedHead = query.expected_head ?? null
      if (expectedHead !== null && (selectedBranch === null || !Blake3.isHash(expectedHead))) {
        return yield* bad("expected_head must be a full commit hash, with selected_branch")
      }
      const blob = query.blob ?? null
      if (blob !== null && !Blake3.isHash(blob)) return yield* bad("blob must be a hash: 64 lowercase hex characters")
      if (!bounded && (selectedBranch !== null || query.known_loss_protocol !== undefined)) {
        return yield* bad(`selected_branch and known_loss_protocol require proof_profile=${PROOF_PROFILE}`)
      }
      if (bounded && blob !== null) return yield* bad(`blob evidence is not available under proof_profile=${PROOF_PROFILE}`)
      if (query.sparse_materialization_protocol !== undefined && query.sparse_materialization_protocol !== SPARSE_MATERIALIZATION) {
        return yield* bad(`sparse_materialization_protocol must be ${SPARSE_MATERIALIZATION}`)
      }
      if (query.known_loss_protocol !== undefined && query.known_loss_protocol !== KNOWN_LOSS) return yield* bad(`known_loss_protocol must be ${KNOWN_LOSS}`)
      if (depth !== null && selectedBranch !== null && branch !== null && branch !== selectedBranch) {
        return yield* bad("shallow history branch must match selected_branch")
      }
      const cone = SparseCone.parseCone(query.paths ?? "")
      if (!cone.ok) return yield* bad(cone.reason)
      const withheld = yield* withheldAtHeads(yield* callerPolicy(caller, repo), repo)
      const proof = yield* dbUnavailable(proofs.prove(repo, {
        depth,
        branch,
        selectedBranch,
        cone: cone.prefixes,
        verification,
        maxChunks,
        maxBytes,
        blob,
        withheld
      })).pipe(Effect.catch((error) =>
        error instanceof ApiErrors.ServiceUnavailable
          ? Effect.fail(error)
          : Effect.logWarning("integrity proof could not read stored content", error).pipe(
            Effect.andThen(Effect.fail(new ApiErrors.ServiceUnavailable({ error: "stored content is unavailable; try again", code: "unavailable", retryable: true })))
          )
      ))
      yield* checkSelected(selectedBranch, expectedHead, proof.capture.selected)
      const complete = !proof.budgetExhausted
      const healthy = proof.findings.length === 0 && complete
      return {
        schema_version: 1,
        repo: `${repo.owner}/${repo.name}`,
        head: proof.capture.head,
        status: healthy ? "healthy" : "content_incomplete",
        healthy,
        complete,
        truncated: !complete,
        verification,
        scope: {
          depth,
          commit_count: proof.commitCount,
          manifest_count: proof.manifestCount,
          blob_count: proof.blobCount,
          chunk_count: proof.chunkCount,
          verified_chunk_count: proof.verifiedChunkCount,
          verified_byte_count: proof.verifiedByteCount
        },
        findings: proof.findings,
        advisories: [],
        blob_evidence: proof.blobEvidence,
        head_affected: proof.headAffected,
        shallow_recovery_available: !healthy && !proof.headAffected && depth === null,
        recommended_next_commands: [],
        ...(bounded
          ? {
            proof_profile: PROOF_PROFILE,
            snapshot_token: encodeSnapshot({ depth, branch, paths: query.paths ?? null, selectedBranch, expectedHead }, proof.capture),
            ...(proof.capture.selected === undefined || selectedBranch === null ? {} : { selected_branch: proof.capture.selected })
          }
          : {}),
        ...(query.sparse_materialization_protocol === undefined ? {} : { sparse_materialization_protocol: SPARSE_MATERIALIZATION }),
        ...(query.known_loss_protocol === undefined ? {} : { known_loss_protocol: KNOWN_LOSS })
      }
    })
  })
}))
