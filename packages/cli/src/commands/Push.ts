/**
 * `grove push`: checkpoints the working tree, creates the repository on its
 * first push, uploads the blobs the server lacks, and publishes the branch's
 * unpushed commits with an optimistic check on the branch head. Also the
 * metadata-only push that `desc` and `close` use.
 */
import * as ApiSync from "@grove/api/Sync"
import { Deferred, Effect, Fiber, Schema } from "effect"
import { SendGate } from "../Client.ts"
import { crashPoint } from "../CrashPoints.ts"
import type { CliFailure } from "../Failures.ts"
import { failure } from "../Failures.ts"
import { commitWorkingTree } from "../local/Commit.ts"
import type { BranchState, RepoState } from "../local/State.ts"
import { currentBranch, withBranch } from "../local/State.ts"
import type { Workspace } from "../local/Workspace.ts"
import { openWorkspace, repositoryOf, saveState, writeConfig } from "../local/Workspace.ts"
import { Output } from "../Output.ts"
import { askCapabilitiesEarly } from "../sync/BodyCompression.ts"
import { connectRepo } from "../sync/RemoteRepo.ts"
import type { RemoteRepo } from "../sync/RemoteRepo.ts"
import { attempt } from "../sync/Land.ts"
import { whoami } from "../sync/Session.ts"
import {
  blobsStillNeeded,
  branchRecord,
  hashesIn,
  NotSendable,
  nothingToPush,
  outgoing,
  pushAnswer,
  pushedState,
  pushRequest
} from "../sync/Outgoing.ts"
import { uploadBlobs } from "../sync/Upload.ts"

export { nothingToPush }

/**
 * The repository of the checkout, created on the server when missing (the first push of `grove init`).
 * `whoami` is asked only when the answer matters: no owner yet, or the repository must be created.
 */
export const ensureRepository = Effect.fn("Push.ensureRepository")(function*(workspace: Workspace) {
  let current = workspace
  let repository = repositoryOf(workspace)
  let user: string | undefined
  if (repository === undefined) {
    const probe = yield* connectRepo(workspace.config.remote, "-", "-")
    user = yield* whoami(probe.connection)
    // `grove init` without --owner: the repository belongs to the user who pushes it first.
    current = yield* writeConfig(workspace.root, { ...workspace.config, owner: user, name: workspace.config.name ?? "repo" })
    repository = repositoryOf(current)!
  }
  const remote = yield* connectRepo(current.config.remote, repository.owner, repository.name)
  const { call, client, write } = remote.connection
  const existing = yield* call(client.repos.get({ params: repository })).pipe(
    Effect.map(() => true),
    Effect.catchIf((error) => error.details?.["status"] === 404, () => Effect.succeed(false))
  )
  let created = false
  if (!existing) {
    user ??= yield* whoami(remote.connection)
    yield* write(
      client.repos.create({
        payload: { name: repository.name, ...(repository.owner === user ? {} : { organization_slug: repository.owner }) }
      }),
      Schema.Unknown // only the fact matters
    ).pipe(Effect.catchIf((error) => error.details?.["status"] === 409, () => Effect.void))
    created = true
  }
  return { workspace: current, remote, created }
})

/**
 * The repository once the branch has been on the server (it has a remote head): it exists, so no
 * request is needed to find out. Otherwise `ensureRepository`.
 */
const repositoryFor = Effect.fn("Push.repositoryFor")(function*(workspace: Workspace, branch: BranchState) {
  const repository = repositoryOf(workspace)
  if (branch.remote_head === null || repository === undefined) return yield* ensureRepository(workspace)
  const remote = yield* connectRepo(workspace.config.remote, repository.owner, repository.name)
  return { workspace, remote, created: false }
})

/** Sends the branch record alone (`commits: []`): the description, and open -> closed. */
export const pushMetadata = Effect.fn("Push.metadata")(function*(remote: RemoteRepo, branch: BranchState) {
  const answer = yield* remote.connection.call(remote.connection.client.sync.push({
    params: { owner: remote.owner, name: remote.name },
    payload: { expected_head: branch.remote_head, branch: branchRecord(branch), commits: [], blobs: [], trees: [] }
  }))
  if (!answer.success) return yield* failure(answer.message, "push_rejected")
  return answer
})

/** The server's 409 for a push whose objects garbage collection removed after it was prepared. */
const OBJECTS_MISSING = "objects_missing"

/** Up to 10 minutes of polling a push the server answered 202 (still landing). */
const PUSH_POLL = { attempts: 600, interval: "1 second" } as const

/** What a push of `branch` sends (sync/Outgoing.ts), its failures as the command's. */
const outgoingOf = (workspace: Workspace, branch: BranchState) =>
  Effect.try({
    try: () => outgoing(workspace.objects.reader, branch),
    catch: (error) => error instanceof NotSendable ? failure(error.message, error.code) : error as CliFailure
  })

export interface PushOutcome {
  readonly state: RepoState
  readonly pushed: number
  readonly head: string | null
  readonly uploadedBytes: number
  readonly uploadedChunks: number
  /** Bytes of chunk data on the wire (compressed chunks count as sent). */
  readonly sentBytes: number
  readonly createdRepository: boolean
}

/** Publishes the current branch; `success: false` from the server is a failure telling the user to pull. */
export const publish = Effect.fn("Push.publish")(function*(opened: Workspace, start: RepoState) {
  const branch0 = currentBranch(start)
  if (branch0.name === "main") {
    return yield* failure(
      "pushes to main are refused: main changes only by merge. Run grove switch -c NAME: your changes and unpushed commits move to the new branch, then grove push",
      "main_refused"
    )
  }
  const committed = yield* commitWorkingTree(opened, start)
  let state = committed.state
  const branch = currentBranch(state)
  if (nothingToPush(branch)) {
    // The server has this head already: no request at all (`NoopPush.ts` answers this before loading the client).
    return { state, pushed: 0, head: branch.remote_head, uploadedBytes: 0, uploadedChunks: 0, sentBytes: 0, createdRepository: false } satisfies PushOutcome
  }
  const { created, remote, workspace } = yield* repositoryFor(opened, branch)
  yield* crashPoint("push:repository")
  if (branch.unpushed.length === 0) {
    if (branch.description_pending === true || branch.close_pending === true) yield* pushMetadata(remote, branch)
    state = withBranch(state, { ...branch, description_pending: false, close_pending: false })
    yield* saveState(workspace, state)
    return { state, pushed: 0, head: branch.remote_head, uploadedBytes: 0, uploadedChunks: 0, sentBytes: 0, createdRepository: created } satisfies PushOutcome
  }
  const { blobs, commits: allCommits, trees } = yield* outgoingOf(workspace, branch)
  // The push's JSON holds a 64-hex hash at least per file change and tree entry: when that alone reaches the size
  // from which the body goes compressed, the capabilities that decides it are asked while the blobs upload.
  askCapabilitiesEarly(remote.site, remote.token, 64 * hashesIn(allCommits, trees))
  // Under a fresh Idempotency-Key per send: a connection lost as the push went out (a keep-alive socket the
  // server closed while this built a large body) is sent again, and the server acts on it at most once.
  const send = (expected: string | null, commits: ReadonlyArray<ApiSync.CommitData>, pushed: ReadonlyArray<ApiSync.BlobData>) =>
    attempt(remote.connection.write(
      remote.connection.client.sync.push({
        params: { owner: remote.owner, name: remote.name },
        payload: pushRequest(expected, branch, commits, pushed, trees)
      }),
      ApiSync.PushResponse,
      // A large push can outlast the server's reply wait (202 and an operation): follow it to the end.
      PUSH_POLL
    )).pipe(Effect.mapError((error) =>
      error.details?.["status"] === 400 && /main/i.test(error.message)
        ? failure(`the server refused the push: ${error.message} (main changes only by merge)`, error.code, error.details)
        : error
    ))
  // The push does not depend on the batches' answers: once the blob list is known (at the first batch's answer) its
  // body is encoded and compressed while the other batches upload, and waits at the gate, which opens when they have
  // all succeeded (a failed batch fails the push, and this request never goes).
  const blobList = yield* Deferred.make<ReadonlyArray<ApiSync.BlobData>>()
  const gate = yield* Deferred.make<void>()
  const early = yield* Effect.forkChild(
    Effect.flatMap(Deferred.await(blobList), (pushed) => send(branch.remote_head, allCommits, pushed)).pipe(
      Effect.provideService(SendGate, Deferred.await(gate))
    )
  )
  let uploaded = yield* uploadBlobs(remote, blobs, (list) => Deferred.doneUnsafe(blobList, Effect.succeed(list))).pipe(
    Effect.onError(() => Fiber.interrupt(early))
  )
  yield* crashPoint("push:uploaded")
  yield* Deferred.succeed(gate, undefined)
  let commits: ReadonlyArray<ApiSync.CommitData> = allCommits
  let answer = yield* Fiber.join(early).pipe(
    // gc removed objects the push relied on after the server prepared it (nothing was published): the
    // server now reports them missing, so uploading again and sending the same push makes it whole.
    Effect.catchIf((error) => error.code === OBJECTS_MISSING, () =>
      Effect.gen(function*() {
        uploaded = yield* uploadBlobs(remote, blobs)
        return yield* send(branch.remote_head, commits, uploaded.blobs)
      }))
  )
  if (!answer.success && answer.new_head !== null) {
    // An earlier push was stopped after the server took it and before this checkout recorded it:
    // the server's head is one of our own unpushed commits. Send only what follows it.
    const landed = commits.findIndex((c) => c.hash === answer.new_head)
    if (landed >= 0) {
      commits = commits.slice(landed + 1)
      answer = commits.length === 0
        ? { ...answer, success: true }
        : yield* send(answer.new_head, commits, uploaded.blobs)
    }
  }
  yield* crashPoint("push:sent")
  if (!answer.success) {
    return yield* failure(
      `the push was refused: remote head has changed; run grove pull (server: ${answer.message})`,
      "remote_head_changed",
      { new_head: answer.new_head, server_message: answer.message }
    )
  }
  const tip = allCommits[allCommits.length - 1]!.hash
  state = pushedState(state, branch, tip)
  yield* saveState(workspace, state)
  // The server has the pushed blobs now; keep only what other branches still need.
  const stillNeeded = yield* Effect.try({ try: () => blobsStillNeeded(state, workspace.objects.reader.readCommit), catch: (error) => error as CliFailure })
  if (stillNeeded.size === 0) yield* workspace.objects.dropAllBlobs
  else for (const blob of blobs) if (!stillNeeded.has(blob.hash)) yield* workspace.objects.dropBlob(blob.hash)
  return {
    state,
    pushed: allCommits.length,
    head: tip,
    uploadedBytes: uploaded.uploadedBytes,
    uploadedChunks: uploaded.uploadedChunks,
    sentBytes: uploaded.sentBytes,
    createdRepository: created
  } satisfies PushOutcome
})

export const push = Effect.fn("Push.run")(function*() {
  const out = yield* Output
  const { state, workspace } = yield* openWorkspace()
  const result = yield* publish(workspace, state)
  const branch = currentBranch(result.state)
  const answer = pushAnswer({ ...result, branch: branch.name })
  yield* out.result(answer.value, answer.human)
})
