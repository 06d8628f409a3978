/**
 * The staged push endpoints (contract: `@grove/api` StagedPushGroups). A batch is verified here,
 * outside the entity, like a whole push (PushPreparation), and recorded against its stage with a
 * compare-and-set; the finalizer is one Branch command (FinalizeStageCommand). Blob proofs are
 * BlobProofs' work; these handlers authorize, validate and answer.
 */
import { ApiErrors, type ApiStagedPush, CurrentCaller, GroveApi } from "@grove/api"
import { Access } from "@grove/core"
import { mappingDigest } from "@grove/core/objects/MappingDigest"
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { branchKey } from "../content/BranchCommands.ts"
import { Branches } from "../content/Branches.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects, type DedupScope } from "../content/ContentObjects.ts"
import { dedupScope } from "../path-permissions/DedupScope.ts"
import { MAIN_BRANCH, preparePush } from "../content/PushPreparation.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { contentFailure } from "../content/ContentFailures.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import { BlobProofs, type ProofAnswer } from "./BlobProofs.ts"
import { MAX_ACTIVE_STAGES, PushStages, sameBoundary, type StageBoundary } from "./PushStages.ts"
import { finalizeFailure, proofFailure, tooManyStages } from "./StagedPushErrors.ts"
import { StagedPushGateway } from "./StagedPushGateway.ts"

/** Per batch, as the Oak client sends them (oak-core STAGED_ENVELOPE_MAX_COMMITS and friends). */
export const BATCH_MAX_COMMITS = 500
export const STAGE_MAX_COMMITS = 100_000

const BOUNDARY_CHANGED = "Conflict: staged session boundary changed"

const bad = (error: string, code = "invalid_push") => Effect.fail(new ApiErrors.BadRequest({ error, code }))

/** The branch record a stage is bound to, in a fixed order (a later batch must send the same). */
const branchIdentity = (b: ApiStagedPush.StagedPushRequest["branch"]) =>
  JSON.stringify([b.name, b.description ?? null, b.parent_branch ?? null, b.status, b.created_at, b.close_reason ?? null])

const answer = (a: ProofAnswer) => HttpServerResponse.jsonUnsafe(a.body, { status: a.status })

export const StagedPushHandlers = HttpApiBuilder.group(GroveApi, "stagedPush", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const objects = yield* ContentObjects
  const chunkStore = yield* ChunkStore
  const branches = yield* Branches
  const stages = yield* PushStages
  const proofs = yield* BlobProofs
  const gateway = yield* StagedPushGateway
  const withContent = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(ContentObjects, objects), Effect.provideService(ChunkStore, chunkStore))

  /**
   * The caller's dedup scope in a repository it may write, and whether it administers the repository
   * (an admin or owner of its organization, with the admin scope): admins see and abort every stage.
   */
  const writable = Effect.fnUntraced(function*(owner: string, name: string) {
    const caller = yield* CurrentCaller
    const repo = yield* dbUnavailable(authorizer.repository(caller, owner, name, "write"))
    const scope = yield* dbUnavailable(withContent(dedupScope(caller, repo)))
    const admin = Access.decide(caller.principal, caller.limits, {
      kind: "repository",
      repoId: repo.id,
      orgId: repo.orgId,
      isPublic: repo.isPublic,
      callerRole: repo.callerRole
    }, "admin")._tag === "Allow"
    return { repo, scope, admin }
  })

  /** Chunked blobs name a complete proof of theirs: answers their hashes (registered by the proof), or fails. */
  const provenBlobs = Effect.fnUntraced(function*(scope: DedupScope, blobs: ApiStagedPush.StagedPushRequest["blobs"]) {
    const proven = new Set<string>()
    for (const blob of blobs) {
      const chunks = blob.chunks ?? []
      const token = blob.mapping_proof_token ?? null
      if (chunks.length === 0) {
        if (token !== null) return yield* bad(`inline blob ${blob.hash} must not carry a mapping proof token`, "invalid_blob")
        continue
      }
      if (token === null) return yield* bad(`chunked blob ${blob.hash} needs the mapping_proof_token of its async_v1 proof`, "missing_proof")
      const proof = yield* dbUnavailable(proofs.completed(scope, token))
      const declared = proof?.descriptors.find((d) => d.hash === blob.hash)
      if (
        proof === undefined || declared === undefined || !proof.verified.includes(blob.hash) || declared.size !== blob.size ||
        declared.total_chunks !== chunks.length || declared.mapping_digest !== mappingDigest(chunks)
      ) {
        return yield* new ApiErrors.Conflict({ error: `the mapping proof token does not prove blob ${blob.hash} with this chunk list`, code: "proof_mismatch" })
      }
      proven.add(blob.hash)
    }
    return proven
  })

  return handlers.handleAll({
    stage: Effect.fn("StagedPush.stage")(function*({ params, payload }) {
      const { repo, scope } = yield* writable(params.owner, params.name)
      const name = payload.branch.name
      if (name === MAIN_BRANCH) {
        return yield* new ApiErrors.Forbidden({ error: "main changes only by merge or revert: push a branch and merge it", code: "main_protected" })
      }
      // The contract checked the branch name, the stage id and every hash (400 invalid_request).
      const expected = payload.expected_branch_head
      const boundary: StageBoundary = {
        stageId: payload.stage_id,
        principal: scope.principal,
        branch: name,
        branchIdentity: branchIdentity(payload.branch),
        expectedHead: expected,
        force: payload.force ?? false
      }
      const trees = payload.trees ?? []
      const empty = payload.commits.length === 0 && payload.blobs.length === 0 && trees.length === 0
      const target = payload.target_head ?? null

      let stage = yield* dbUnavailable(stages.find(repo.id, payload.stage_id))
      // Someone else's stage is not there for this caller.
      if (stage !== undefined && stage.principal !== scope.principal) stage = undefined
      if (stage !== undefined) {
        if (!sameBoundary(stage, boundary)) return yield* bad("stage_id is already bound to a different branch boundary", "stage_mismatch")
        if (stage.state === "completed") {
          if (payload.finalize && empty && target === stage.completedTarget) return { success: true, new_head: target, message: "already finalized" }
          return yield* bad("a completed stage accepts only an exact finalization replay", "stage_completed")
        }
        if (stage.state === "aborted") {
          return yield* new ApiErrors.Conflict({ error: "staged session was aborted and cannot be reused", code: "stage_aborted" })
        }
      }
      const current = yield* dbUnavailable(branches.get(repo.id, name))
      const head = current?.head ?? null
      if (head !== expected) return { success: false, new_head: head, message: BOUNDARY_CHANGED }

      if (payload.finalize) {
        if (!empty) return yield* bad("a staged finalization carries no objects", "invalid_push")
        if (target === null) return yield* bad("finalization needs target_head, a commit hash", "invalid_hash")
        if (stage === undefined) return yield* bad(`staged session ${payload.stage_id} is missing or expired`, "stage_missing")
        return yield* gateway.finalize(branchKey(repositoryKey(repo.owner, repo.name), name), {
          stageId: payload.stage_id,
          principal: scope.principal,
          branchIdentity: boundary.branchIdentity,
          expectedHead: expected,
          force: boundary.force,
          target,
          branch: payload.branch,
          actor: yield* actorName
        }, yield* commandRequest).pipe(Effect.catch(finalizeFailure))
      }

      if (target !== null) return yield* bad("target_head is only for the finalization (finalize: true)", "invalid_push")
      if (payload.commits.length > BATCH_MAX_COMMITS) return yield* bad(`at most ${BATCH_MAX_COMMITS} commits per staged batch`, "too_large")
      if ((stage?.commitCount ?? 0) + payload.commits.length > STAGE_MAX_COMMITS) {
        return yield* bad(`a staged push carries at most ${STAGE_MAX_COMMITS} commits`, "too_large")
      }
      if (stage === undefined) {
        stage = yield* dbUnavailable(stages.open(repo.id, boundary))
        if (stage === undefined) return yield* tooManyStages(MAX_ACTIVE_STAGES)
        if (stage.principal !== scope.principal || !sameBoundary(stage, boundary) || stage.state !== "active") {
          return yield* bad("stage_id is already bound to a different branch boundary", "stage_mismatch")
        }
      }
      const proven = yield* provenBlobs(scope, payload.blobs)
      const stagedCommits = yield* dbUnavailable(stages.commits(repo.id, payload.stage_id))
      const prepared = yield* contentFailure(withContent(preparePush(repo, {
        branch: payload.branch,
        commits: payload.commits,
        // Proven blobs were registered for this caller by their proof: nothing to read again.
        blobs: payload.blobs.filter((b) => !proven.has(b.hash)),
        trees
      }, scope, { stagedCommits })))
      const admitted = yield* dbUnavailable(stages.admit(repo.id, payload.stage_id, stage.version, {
        commits: prepared.commits,
        trees: prepared.newTrees,
        blobs: prepared.newBlobs
      }))
      if (!admitted) {
        return yield* new ApiErrors.Conflict({ error: "the staged session changed while this batch was checked; send it again", code: "stage_raced" })
      }
      return { success: true, new_head: null, message: "staged" }
    }),

    list: Effect.fn("StagedPush.list")(function*({ params, query }) {
      const { repo, scope, admin } = yield* writable(params.owner, params.name)
      const page = yield* pageRequest(query, ["timestamp", "text"])
      const rows = yield* dbUnavailable(stages.listOpen(repo.id, admin ? undefined : scope.principal, page))
      return { stages: yield* pageResponse(rows, page) }
    }),

    abort: Effect.fn("StagedPush.abort")(function*({ params, payload }) {
      const { repo, scope, admin } = yield* writable(params.owner, params.name)
      const expected = payload.expected_branch_head
      const stage = yield* dbUnavailable(stages.find(repo.id, params.stage_id))
      // Someone else's stage is not there for this caller, unless the caller administers the repository.
      if (stage === undefined || (stage.principal !== scope.principal && !admin)) return { aborted: false, state: "missing" }
      if (stage.branch !== payload.branch_name || stage.expectedHead !== expected) {
        return yield* bad("the abort does not match the stage's branch boundary", "stage_mismatch")
      }
      if (stage.state === "completed") {
        return yield* new ApiErrors.Conflict({ error: "a completed staged session cannot be aborted", code: "stage_completed" })
      }
      // An admin's abort of someone else's stage is audited, in the abort's transaction.
      const audited = stage.principal === scope.principal ? undefined : {
        orgId: repo.orgId,
        actor: yield* actorName,
        repository: `${repo.owner}/${repo.name}`,
        branch: stage.branch,
        of: stage.principal
      }
      if (stage.state === "active" && !(yield* dbUnavailable(stages.abort(repo.id, params.stage_id, stage.version, audited)))) {
        const now = yield* dbUnavailable(stages.find(repo.id, params.stage_id))
        if (now?.state === "completed") {
          return yield* new ApiErrors.Conflict({ error: "a completed staged session cannot be aborted", code: "stage_completed" })
        }
        if (now?.state === "active") {
          return yield* new ApiErrors.Conflict({ error: "the staged session changed during the abort; send it again", code: "stage_raced" })
        }
      }
      return { aborted: true, state: "aborted" }
    }),

    createProof: Effect.fn("StagedPush.createProof")(function*({ params, payload }) {
      const { scope } = yield* writable(params.owner, params.name)
      return answer(yield* dbUnavailable(proofs.create(scope, payload.blobs)).pipe(Effect.catchTag("ProofRefused", proofFailure)))
    }),

    proofPages: Effect.fn("StagedPush.proofPages")(function*({ params, payload }) {
      const { scope } = yield* writable(params.owner, params.name)
      return yield* dbUnavailable(proofs.putPages(scope, params.token, payload.pages)).pipe(Effect.catchTag("ProofRefused", proofFailure))
    }),

    finalizeProof: Effect.fn("StagedPush.finalizeProof")(function*({ params }) {
      const { scope } = yield* writable(params.owner, params.name)
      return answer(yield* dbUnavailable(proofs.finalize(scope, params.token)).pipe(Effect.catchTag("ProofRefused", proofFailure)))
    }),

    proof: Effect.fn("StagedPush.proof")(function*({ params }) {
      const { scope } = yield* writable(params.owner, params.name)
      return answer(yield* dbUnavailable(proofs.poll(scope, params.token)).pipe(Effect.catchTag("ProofRefused", proofFailure)))
    })
  })
}))
