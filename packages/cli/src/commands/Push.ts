/**
 * `grove push`: checkpoints the working tree, creates the repository on its
 * first push, uploads the blobs the server lacks, and publishes the branch's
 * unpushed commits with an optimistic check on the branch head. Also the
 * metadata-only push that `desc` and `close` use.
 */
import { ApiSync } from "@grove/api"
import { Effect, Schema } from "effect"
import * as fs from "node:fs/promises"
import { crashPoint } from "../CrashPoints.ts"
import type { CliFailure } from "../Failures.ts"
import { failure } from "../Failures.ts"
import { commitWorkingTree } from "../local/Commit.ts"
import { io } from "../local/Io.ts"
import { blobPath } from "../local/Objects.ts"
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
import type { OutgoingBlob } from "../sync/Upload.ts"
import { uploadBlobs } from "../sync/Upload.ts"

export const branchRecord = (branch: BranchState): ApiSync.BranchData => ({
  name: branch.name,
  description: branch.description,
  parent_branch: branch.parent_branch,
  status: branch.status,
  created_at: branch.created_at
})

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

/** Nothing to send: no local commit and no pending branch metadata, on a branch the server has. */
export const nothingToPush = (branch: BranchState): boolean =>
  branch.unpushed.length === 0 && branch.remote_head !== null && branch.head === branch.remote_head &&
  branch.description_pending !== true && branch.close_pending !== true

/** Sends the branch record alone (`commits: []`): the description, and open -> closed. */
export const pushMetadata = Effect.fn("Push.metadata")(function*(remote: RemoteRepo, branch: BranchState) {
  const answer = yield* remote.connection.call(remote.connection.client.sync.push({
    params: { owner: remote.owner, name: remote.name },
    payload: { expected_head: branch.remote_head, branch: branchRecord(branch), commits: [], blobs: [], trees: [] }
  }))
  if (!answer.success) return yield* failure(answer.message, "push_rejected")
  return answer
})

type TreeEntry = ApiSync.TreeData["entries"][number]

/** The server's 409 for a push whose objects garbage collection removed after it was prepared. */
const OBJECTS_MISSING = "objects_missing"

/** Up to 10 minutes of polling a push the server answered 202 (still landing). */
const PUSH_POLL = { attempts: 600, interval: "1 second" } as const

/**
 * The trees a push of `commits` must carry: every tree of each commit that is not, at the same
 * path, a tree of one of its parents. A parent is either in the same push (its trees are sent too)
 * or published on the server (which then holds all of its trees), so whatever is left out the
 * server has. This walks only the directories that changed, and it does not trust the local
 * bookkeeping of which trees were "new" at commit time: that says nothing about what the server
 * has (a commit interrupted after its trees were written, or a tree first written for another
 * branch, is recorded as introducing none). A parent whose trees are not here counts as empty,
 * which only sends more.
 */
export const treesToSend = Effect.fn("Push.treesToSend")(function*(
  workspace: Workspace,
  commits: ReadonlyArray<ApiSync.CommitData>
) {
  const out = new Map<string, ReadonlyArray<TreeEntry>>()
  const manifests = new Map(commits.map((c) => [c.hash, c.manifest_hash]))
  const manifestOf = (hash: string) =>
    Effect.gen(function*() {
      const known = manifests.get(hash)
      if (known !== undefined) return known
      return (yield* workspace.objects.readCommit(hash))?.commit.manifest_hash
    })
  const walk = (hash: string, bases: ReadonlyArray<string>): Effect.Effect<void, CliFailure> =>
    Effect.gen(function*() {
      if (bases.includes(hash) || out.has(hash)) return
      const entries = yield* workspace.objects.readTree(hash)
      if (entries === undefined) return yield* failure(`tree ${hash} is missing from .grove/objects`, "missing_object")
      out.set(hash, entries)
      const baseEntries: Array<ReadonlyArray<TreeEntry>> = []
      for (const base of bases) {
        const read = yield* workspace.objects.readTree(base)
        if (read !== undefined) baseEntries.push(read)
      }
      for (const entry of entries) {
        if (entry.kind !== "tree") continue
        const childBases = baseEntries.flatMap((b) => b.filter((e) => e.kind === "tree" && e.name === entry.name).map((e) => e.hash))
        yield* walk(entry.hash, childBases)
      }
    })
  for (const commit of commits) {
    const bases: Array<string> = []
    for (const parent of [commit.parent_hash, commit.merge_parent_hash]) {
      if (parent == null) continue
      const manifest = yield* manifestOf(parent)
      if (manifest !== undefined) bases.push(manifest)
    }
    yield* walk(commit.manifest_hash, bases)
  }
  return [...out].map(([hash, entries]): ApiSync.TreeData => ({ hash, entries }))
})

/** The commits, trees and kept blobs a push of `branch` sends. */
const outgoing = Effect.fn("Push.outgoing")(function*(workspace: Workspace, branch: BranchState) {
  const commits: Array<ApiSync.CommitData> = []
  const blobs: Array<OutgoingBlob> = []
  const seen = new Set<string>()
  for (const hash of branch.unpushed) {
    const stored = yield* workspace.objects.readCommit(hash)
    if (stored === undefined) return yield* failure(`local commit ${hash} is missing from .grove/objects`, "missing_object")
    commits.push(stored.commit)
    for (const change of stored.commit.files) {
      const blob = change.new_blob_hash
      if (blob == null || seen.has(blob) || !(yield* workspace.objects.hasBlob(blob))) continue
      seen.add(blob)
      const file = blobPath(workspace.root, blob)
      const { size } = yield* io(`cannot read ${file}`, () => fs.stat(file))
      blobs.push({ hash: blob, size, file })
    }
  }
  const trees = yield* treesToSend(workspace, commits)
  return { commits, trees, blobs }
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
  const { blobs, commits: allCommits, trees } = yield* outgoing(workspace, branch)
  // The push's JSON holds a 64-hex hash at least per file change and tree entry: when that alone reaches the size
  // from which the body goes compressed, the capabilities that decides it are asked while the blobs upload.
  const hashes = allCommits.reduce((n, c) => n + c.files.length, 0) + trees.reduce((n, t) => n + t.entries.length, 0)
  askCapabilitiesEarly(remote.site, remote.token, 64 * hashes)
  let uploaded = yield* uploadBlobs(remote, blobs)
  yield* crashPoint("push:uploaded")
  // Under a fresh Idempotency-Key per send: a connection lost as the push went out (a keep-alive socket the
  // server closed while this built a large body) is sent again, and the server acts on it at most once.
  const send = (expected: string | null, commits: ReadonlyArray<ApiSync.CommitData>) =>
    attempt(remote.connection.write(
      remote.connection.client.sync.push({
        params: { owner: remote.owner, name: remote.name },
        payload: { expected_head: expected, force: false, branch: branchRecord(branch), commits: [...commits], blobs: [...uploaded.blobs], trees }
      }),
      ApiSync.PushResponse,
      // A large push can outlast the server's reply wait (202 and an operation): follow it to the end.
      PUSH_POLL
    )).pipe(Effect.mapError((error) =>
      error.details?.["status"] === 400 && /main/i.test(error.message)
        ? failure(`the server refused the push: ${error.message} (main changes only by merge)`, error.code, error.details)
        : error
    ))
  let commits: ReadonlyArray<ApiSync.CommitData> = allCommits
  let answer = yield* send(branch.remote_head, commits).pipe(
    // gc removed objects the push relied on after the server prepared it (nothing was published): the
    // server now reports them missing, so uploading again and sending the same push makes it whole.
    Effect.catchIf((error) => error.code === OBJECTS_MISSING, () =>
      Effect.gen(function*() {
        uploaded = yield* uploadBlobs(remote, blobs)
        return yield* send(branch.remote_head, commits)
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
        : yield* send(answer.new_head, commits)
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
  state = withBranch(state, { ...branch, remote_head: tip, unpushed: [], description_pending: false, close_pending: false })
  yield* saveState(workspace, state)
  // The server has the pushed blobs now; keep only what other branches still need.
  const stillNeeded = new Set<string>()
  for (const other of Object.values(state.branches)) {
    for (const hash of other.unpushed) {
      const stored = yield* workspace.objects.readCommit(hash)
      for (const file of stored?.commit.files ?? []) if (file.new_blob_hash != null) stillNeeded.add(file.new_blob_hash)
    }
  }
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
  yield* out.result(
    {
      branch: branch.name,
      head: result.head,
      pushed_commits: result.pushed,
      uploaded_chunks: result.uploadedChunks,
      uploaded_bytes: result.uploadedBytes,
      sent_bytes: result.sentBytes,
      created_repository: result.createdRepository
    },
    () =>
      result.pushed === 0
        ? `Already up to date (${branch.name}).`
        : `${result.createdRepository ? "Created the repository. " : ""}Pushed ${result.pushed} commit(s) to ${branch.name} (head ${result.head?.slice(0, 12)}; ${result.uploadedChunks} chunk(s), ${result.uploadedBytes} bytes uploaded).`
  )
})
