/**
 * `grove push` of a few small files, answered before the client loads (Effect, the typed HTTP client and the API
 * schemas are most of a one-file push's CPU): the working tree is exactly the branch head as the index records it
 * (the push's checkpoint would commit nothing) and the unpushed commits' kept blobs are small, 64 KiB or less in all.
 * It sends what the full push sends, built by the same code (sync/Outgoing.ts, BodyCompression.ts): one
 * `chunks/batch` of hashed frames, then the push (zstd when large and the server takes it), with the same headers.
 *
 * Anything else answers undefined before a request is made, and the full command runs: a merge in progress, pending
 * branch metadata, a first push, a large blob, no credential or a credentials file the full command would warn about,
 * `GROVE_TEST_CRASH_AT`. After a request, any answer but a taken push (a refusal, a 202 still landing, a network
 * failure) also answers undefined: the full command then uploads and pushes again (chunks are stored by hash, and a
 * push that landed meanwhile is recognised by its head), and reports whatever it gets, as it always does.
 */
import type { ApiSync } from "@grove/api"
import * as fs from "node:fs"
import * as path from "node:path"
import { randomUuid, writeJsonAtomic } from "./local/Files.ts"
import { dropAllKeptBlobs, dropKeptBlob, keptBlobSize, readCommitFile, readCommitManifest, readTreeFile } from "./local/ObjectFiles.ts"
import type { RepoState } from "./local/State.ts"
import { statePath } from "./local/State.ts"
import type { CheckoutFound } from "./NoopPush.ts"
import { normaliseRemote } from "./Remote.ts"
import { parseSessions, sessionExpired } from "./SessionFile.ts"
import { ACCEPT_ENCODING, askCapabilitiesEarly, downloadCompression, squeezeBody } from "./sync/BodyCompression.ts"
import { sendBytes } from "./sync/HttpSend.ts"
import type { ObjectReader } from "./sync/Outgoing.ts"
import {
  batchesOf,
  blobsStillNeeded,
  COMPRESS_CHUNKS_FROM,
  HASHED_FRAMES_TYPE,
  hashedBatch,
  hashesIn,
  isLarge,
  outgoing,
  pushAnswer,
  pushedState,
  pushRequest,
  readRangeSync,
  sendsUnasked,
  uniqueBlobs,
  wholeChunk
} from "./sync/Outgoing.ts"

/**
 * The login session's token for `remote` in `~/.grove/credentials`, when the full command would take the file without
 * a word (Credentials.ts: a valid file by SessionFile.ts, not readable by others, else it warns or fails) and the
 * session has not expired; undefined otherwise (the full command then decides).
 */
const sessionToken = (home: string, remote: string): string | undefined => {
  const fd = fs.openSync(path.join(home, ".grove", "credentials"), "r")
  try {
    if ((fs.fstatSync(fd).mode & 0o077) !== 0) return undefined
    const session = parseSessions(fs.readFileSync(fd, "utf8"))?.[remote]
    return session === undefined || sessionExpired(session) ? undefined : session.token
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * The token the full command would send, in CredentialResolver's order: SERVICE_API_KEY, the checkout's key (for the
 * checkout's own server, which is where a push goes), the login session for that server.
 */
const tokenFor = (found: CheckoutFound, env: Readonly<Record<string, string | undefined>>, home: string): string | undefined => {
  const fromEnv = env["SERVICE_API_KEY"]
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv
  return found.key ?? sessionToken(home, found.remote)
}

const readerAt = (root: string): ObjectReader => ({
  root,
  readCommit: (hash) => readCommitFile(root, hash),
  readManifest: (hash) => readCommitManifest(root, hash),
  readTree: (hash) => {
    const entries = readTreeFile(root, hash)
    if (entries === "damaged") throw new Error(`tree ${hash} is damaged`)
    return entries
  },
  keptBlobSize: (hash) => keptBlobSize(root, hash)
})

/**
 * The push of `found`'s branch when it is small (see above), its answer as `grove push [--json]` prints it;
 * undefined when the full command must run. Never rejects.
 */
export const smallPush = async (...args: Parameters<typeof push>): Promise<string | undefined> => {
  try {
    return await push(...args)
  } catch {
    return undefined // any doubt: the full command decides
  }
}

const push = async (
  found: CheckoutFound,
  /** Whether the tree is exactly the index and the index's base is the branch head, settled (NoopPush.treeIsHead). */
  treeIsHead: () => boolean | Promise<boolean>,
  asJson: boolean,
  env: Readonly<Record<string, string | undefined>>,
  home: string
): Promise<string | undefined> => {
  const { branch, remote, repository, root } = found
  if (repository === undefined || branch.remote_head === null || branch.unpushed.length === 0 || branch.unpushed.at(-1) !== branch.head) return undefined
  if ((env["GROVE_TEST_CRASH_AT"] ?? "") !== "") return undefined // the crash points are the full command's
  const token = tokenFor(found, env, home)
  if (token === undefined || normaliseRemote(remote) !== remote) return undefined
  // The checkpoint commits nothing and leaves the index as it is only when every directory and file is as recorded.
  if (!(await treeIsHead())) return undefined

  const { blobs, commits, trees } = outgoing(readerAt(root), branch)
  const unique = uniqueBlobs(blobs)
  const chunks = unique.map(wholeChunk)
  const total = chunks.reduce((sum, c) => sum + c.size, 0)
  if (unique.some(isLarge) || !sendsUnasked(false, chunks) || total >= COMPRESS_CHUNKS_FROM) return undefined
  // Small blobs are their own chunks: the push lists no blob (Upload.ts answers only large ones).
  const json = new TextEncoder().encode(JSON.stringify(pushRequest(branch.remote_head, branch, commits, [] satisfies Array<ApiSync.BlobData>, trees)))

  // A server that does not answer: the full command takes over after the deadline (its own requests then wait as
  // they always do), not after each request's 300 s idle bound.
  const deadline = new AbortController()
  const timer = setTimeout(() => deadline.abort(new Error("the small push's deadline passed")), deadlineMs(env))
  try {
    const base = `${remote}/api/${encodeURIComponent(repository.owner)}/${encodeURIComponent(repository.name)}`
    return await send(found, { asJson, base, chunks, commits, json, token, total, trees, unique }, deadline.signal)
  } finally {
    clearTimeout(timer)
  }
}

/** The small push's requests together may take this long (GROVE_TEST_SMALL_PUSH_DEADLINE_MS: tests). */
const deadlineMs = (env: Readonly<Record<string, string | undefined>>): number => Number(env["GROVE_TEST_SMALL_PUSH_DEADLINE_MS"]) || 30_000

/** What `push` found to send. */
interface Sending {
  readonly asJson: boolean
  /** The repository's API address. */
  readonly base: string
  readonly chunks: ReadonlyArray<ReturnType<typeof wholeChunk>>
  readonly commits: ReturnType<typeof outgoing>["commits"]
  readonly trees: ReturnType<typeof outgoing>["trees"]
  readonly json: Uint8Array
  readonly token: string
  readonly total: number
  readonly unique: ReturnType<typeof uniqueBlobs>
}

/** Rejects when `signal` aborts. */
const aborted = (signal: AbortSignal) =>
  new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }))

const send = async (found: CheckoutFound, sending: Sending, signal: AbortSignal): Promise<string | undefined> => {
  const { branch, remote, root, state } = found
  const { asJson, base, chunks, commits, json, token, total, trees, unique } = sending
  // As Push.ts: the capabilities that decide whether the push's JSON goes compressed are asked while the blobs upload.
  askCapabilitiesEarly(remote, token, 64 * hashesIn(commits, trees))
  const authorization = `Bearer ${token}`
  let sentBytes = 0
  for (const batch of batchesOf(chunks)) {
    const frames = hashedBatch(batch.map((c) => ({ hash: c.hash, data: readRangeSync(c) })))
    const answer = await sendBytes(`${base}/chunks/batch`, {
      method: "POST",
      headers: { authorization, "content-type": HASHED_FRAMES_TYPE },
      body: frames,
      signal
    })
    if (answer.status !== 200) return undefined
    sentBytes += frames.length
  }
  const squeezed = await Promise.race([squeezeBody(remote, token, json), aborted(signal)])
  const answer = await sendBytes(`${base}/push`, {
    method: "POST",
    headers: {
      authorization,
      "idempotency-key": randomUuid(),
      ...(downloadCompression(remote) ? { "accept-encoding": ACCEPT_ENCODING } : {}),
      "content-type": "application/json",
      ...(squeezed === undefined ? {} : { "content-encoding": "zstd" })
    },
    body: squeezed ?? json,
    signal
  })
  if (answer.status !== 200) return undefined
  const taken = JSON.parse(new TextDecoder().decode(answer.body)) as Partial<ApiSync.PushResponse>
  if (taken.success !== true) return undefined

  const tip = commits.at(-1)!.hash
  const next: RepoState = pushedState(state, branch, tip)
  await writeJsonAtomic(statePath(root), next)
  // The server has the pushed blobs now; keep only what other branches still need.
  // The push is taken: from here nothing answers undefined (the full command would find nothing to push). A copy
  // that cannot be removed now stays until the next push drops the kept blobs.
  try {
    const stillNeeded = blobsStillNeeded(next, (hash) => readCommitFile(root, hash))
    if (stillNeeded.size === 0) dropAllKeptBlobs(root)
    else for (const blob of unique) if (!stillNeeded.has(blob.hash)) dropKeptBlob(root, blob.hash)
  } catch {
    // kept for now
  }
  const answered = pushAnswer({
    branch: branch.name,
    head: tip,
    pushed: commits.length,
    uploadedChunks: chunks.length,
    uploadedBytes: total,
    sentBytes,
    createdRepository: false
  })
  return asJson ? JSON.stringify(answered.value, null, 2) : answered.human()
}
