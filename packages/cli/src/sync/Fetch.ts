/**
 * Receiving history: a branch's commits and trees from `pull` (each one
 * re-hashed before it is stored), and turning the working tree into a
 * snapshot, downloading only the blobs that are neither in the tree already
 * nor kept locally.
 */
import * as ApiPullCompact from "@grove/api/PullCompact"
import * as ApiSync from "@grove/api/Sync"
import { Objects } from "@grove/core"
import { Effect, Schema } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { failure } from "../Failures.ts"
import type { CliFailure } from "../Failures.ts"
import { io } from "../local/Io.ts"
import { countWithheld, readWithheld, recordWithheld, withoutWithheld } from "../local/Withheld.ts"
import { blobPath, tempDir } from "../local/Objects.ts"
import { directPlacer } from "../local/Placing.ts"
import type { IndexEntry, Snapshot } from "../local/WorkingTree.ts"
import { applySnapshot, writeIndex } from "../local/WorkingTree.ts"
import type { Workspace } from "../local/Workspace.ts"
import { ACCEPT_ENCODING, askCapabilitiesEarly, COMPRESS_FROM, downloadCompression } from "./BodyCompression.ts"
import type { IncomingBlob } from "./Download.ts"
import type { EarlyFetch } from "./EarlyFetch.ts"
import { downloadBlobs, squeezesHashLists } from "./Download.ts"
import { plainDecoder, REFUSED } from "./PlainDecode.ts"
import type { PullAhead } from "./PullAhead.ts"
import type { RemoteRepo } from "./RemoteRepo.ts"
import { transfer } from "./RemoteRepo.ts"

type HistoryAnswer = { readonly commits: ReadonlyArray<PulledCommit>; readonly trees: ReadonlyArray<ApiSync.TreeData> }
type CheckedTrees = ReadonlyArray<{ readonly hash: string; readonly entries: ReadonlyArray<Objects.Tree.TreeEntry> }>

/** Checks every tree and commit of a pull answer (names, modes, hashes); nothing is written. */
const checkHistory = (answer: HistoryAnswer): Effect.Effect<CheckedTrees, CliFailure> =>
  Effect.suspend(() => {
    const trees = answer.trees.map((tree) => ({ hash: tree.hash, entries: tree.entries as ReadonlyArray<Objects.Tree.TreeEntry> }))
    for (const tree of trees) {
      const check = Objects.Tree.checkTree(tree)
      if (!check.ok) return failure(`the server sent a bad tree: ${check.reason}`, "bad_object")
    }
    for (const commit of answer.commits) {
      const check = Objects.Commit.checkCommit({ ...commit, parent_hash: commit.parent_hash ?? null })
      if (!check.ok) return failure(`the server sent a bad commit: ${check.reason}`, "bad_object")
    }
    return Effect.succeed(trees)
  })

/**
 * Stores checked trees and the commits not stored yet, each with its `files`: those a compact answer left out are
 * rebuilt from the checked trees (api's PullCompact), so a stored commit is the same whichever answer it came in.
 * The rebuild must give what the server compared with (PullCompact.canonicalFiles, frozen for compact_v1): another
 * algorithm needs another answer form, asked for by its own media type.
 */
const writeHistory = Effect.fn("Fetch.writeHistory")(function*(
  workspace: Workspace,
  trees: CheckedTrees,
  pulled: ReadonlyArray<PulledCommit>,
  /** A new checkout's store (a clone's): see ObjectStore.writeTrees. */
  fresh = false
) {
  const rebuilt = ApiPullCompact.rebuildFiles(pulled, ApiPullCompact.treeLookup(trees))
  if (!rebuilt.ok) return yield* failure(`the server sent a bad answer: ${rebuilt.reason}`, "bad_object")
  yield* workspace.objects.writeTrees(trees, fresh)
  for (const commit of rebuilt.commits) {
    if ((yield* workspace.objects.readCommit(commit.hash)) === undefined) yield* workspace.objects.writeCommit({ commit })
  }
})

/** Checks and stores the trees and commits of a pull answer. */
export const storeHistory = Effect.fn("Fetch.storeHistory")(function*(workspace: Workspace, answer: HistoryAnswer) {
  yield* writeHistory(workspace, yield* checkHistory(answer), answer.commits)
})

/** A pulled commit: a compact answer leaves out `files` it can rebuild, which `storeHistory` / `storeFresh` store rebuilt. */
export type PulledCommit = ApiPullCompact.CompactCommitData

/** A pull's answer in the plain form, but for the commits' `files` a compact answer left out (see PulledCommit). */
export type PullAnswer = Omit<ApiSync.PullResponse, "commits"> & { readonly commits: ReadonlyArray<PulledCommit> }

/** `GET pull` for one branch (all of it without `since`), nothing checked or stored yet. */
export const pull = (
  remote: RemoteRepo,
  branch: string,
  since: string | null,
  ahead?: PullAhead,
  /** Given the answer as parsed, before its (~60k values') decode; true when it sent requests, which then go out first. */
  onParsed?: OnParsed
): Effect.Effect<PullAnswer, CliFailure> => {
  // A whole branch (a clone) downloads its files next: the capabilities its chunk requests need (squeezesHashLists)
  // come meanwhile.
  if (since === null && squeezesHashLists(remote.site)) askCapabilitiesEarly(remote.site, remote.token, COMPRESS_FROM)
  const query = new URLSearchParams({ branch_name: branch, ...(since === null ? {} : { since }) })
  // The same request sent before the clone's modules loaded, when it is this one (same server, repository, branch, credential).
  const sent = ahead !== undefined && since === null && ahead.site === remote.site && ahead.owner === remote.owner &&
      ahead.name === remote.name && ahead.branch === branch && ahead.token === remote.token
    ? ahead.answer
    : undefined
  // As the typed client's `sync.pull` (same route, headers, retries and error mapping), but its answer decoded by
  // the schema's compiled plain decoder (PlainDecode.ts): a whole branch is ~60k values. The compact answer is asked
  // for (api's PullCompact: 1.2 of 2.8 MB for 5,000 files); a server without it answers the plain one.
  return Effect.flatMap(
    transfer("pull failed", () =>
      remote.sendBinary(`pull?${query}`, {
        method: "GET",
        acceptEncoding: downloadCompression(remote.site) ? ACCEPT_ENCODING : undefined,
        accept: ApiPullCompact.ACCEPT,
        sent
      })),
    (answer) => {
      const compact = ApiPullCompact.isCompact(answer.headers["content-type"])
      const json = parsePull(answer.body)
      if (json === undefined) return failure(`unexpected answer from ${remote.site} (is it a Grove server of a compatible version?)`, "bad_response")
      // Node writes requests sent now once this turn's work is done, on a new connection once the next poll sees it
      // made: the decode waits that long (two turns of the event loop), so the server reads the chunks meanwhile.
      if (onParsed?.(json.value, compact) === true) return Effect.andThen(Effect.andThen(Effect.yieldNow, Effect.yieldNow), decodePull(remote, json.value, compact))
      return decodePull(remote, json.value, compact)
    }
  )
}

/** See `pull`'s `onParsed`: the answer's JSON as parsed (nothing of it checked) and whether it is the compact form. */
export type OnParsed = (json: unknown, compact: boolean) => boolean

const pullDecoder = plainDecoder(ApiSync.PullResponse)
const compactDecoder = plainDecoder(ApiPullCompact.CompactPullResponse)

const parsePull = (body: Uint8Array): { readonly value: unknown } | undefined => {
  try {
    return { value: JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.length).toString("utf8")) }
  } catch {
    return undefined
  }
}

const decodePull = (remote: RemoteRepo, json: unknown, compact: boolean): Effect.Effect<PullAnswer, CliFailure> => {
  if (!compact) {
    const decoded = pullDecoder === undefined ? REFUSED : pullDecoder(json)
    // Refused (or no plain decoder): the schema's own decoder, which says what is wrong.
    return decoded === REFUSED ? remote.connection.call(Schema.decodeUnknownEffect(ApiSync.PullResponse)(json)) : Effect.succeed(decoded)
  }
  const decoded = compactDecoder === undefined ? REFUSED : compactDecoder(json)
  return Effect.map(
    decoded === REFUSED ? remote.connection.call(Schema.decodeUnknownEffect(ApiPullCompact.CompactPullResponse)(json)) : Effect.succeed(decoded),
    // The blobs in the plain form at once (the download reads their chunk lists); the commits' files once the trees are checked.
    (answer): PullAnswer => ({ ...answer, blobs: ApiPullCompact.expandBlobs(answer.blobs) })
  )
}

/** `GET pull` for one branch (all of it without `since`), its history stored. */
export const fetchBranch = Effect.fn("Fetch.branch")(function*(
  workspace: Workspace,
  remote: RemoteRepo,
  branch: string,
  since: string | null
) {
  const answer = yield* pull(remote, branch, since)
  yield* storeHistory(workspace, answer)
  yield* recordWithheld(workspace.root, [answer])
  return answer
})

/** A whole branch's pull answer for a new checkout, checked: its trees and commits, and its head's files. */
export interface FreshBranch {
  readonly answer: PullAnswer
  readonly trees: CheckedTrees
  readonly snapshot: Snapshot
}

/**
 * A whole branch for a new checkout (`pulled`: its `pull` without `since`): its history checked and its head's files
 * known from the answer's own trees. Nothing is written, so a clone runs this while its other first calls are answered.
 */
export const checkFresh = Effect.fn("Fetch.checkFresh")(function*(
  /** The pull, or how to make it given an `onParsed` (then the files are told from the answer as parsed, see below). */
  pulled: Effect.Effect<PullAnswer, CliFailure> | ((onParsed: OnParsed) => Effect.Effect<PullAnswer, CliFailure>),
  /**
   * Told the blobs the download of a new checkout wants (see `freshWanted`) as soon as the history is checked and the
   * head's files are known: a clone asks for their chunks while it makes the checkout.
   */
  onFiles?: (snapshot: Snapshot, wanted: ReadonlyArray<IncomingBlob>) => void
) {
  // The chunk requests go out before the answer is decoded and its trees and commits are checked (~60-90 ms of a
  // clone's CPU the server would wait through): their answers are held until the download takes them, after this
  // check, so a bad answer still fails here with nothing placed (the clone then stops them). The head's files as the
  // trees were sent are the checked trees' files once the checks pass (same trees, same walk).
  let sent: Snapshot | undefined
  const answer = yield* (typeof pulled !== "function" ? pulled : pulled((json, compact) => {
    const parsed = onFiles === undefined ? undefined : parsedFiles(json, compact)
    if (parsed === undefined || parsed.snapshot.size === 0) return false
    sent = parsed.snapshot
    onFiles!(parsed.snapshot, parsed.wanted)
    return true
  }))
  const head = answer.head === null ? undefined : answer.commits.find((commit) => commit.hash === answer.head)
  if (sent === undefined && onFiles !== undefined && head !== undefined) {
    sent = uncheckedFiles(answer.trees, head.manifest_hash)
    if (sent !== undefined && sent.size > 0) {
      onFiles(sent, freshWanted(sent, answer.blobs, new Set(answer.restricted_blobs ?? [])))
      // Written once the event loop turns (see `pull`).
      yield* Effect.yieldNow
      yield* Effect.yieldNow
    }
  }
  // Checked before the checked trees are walked: a tree whose hash is not its content could make that walk endless (a cycle).
  const trees = yield* checkHistory(answer)
  if (answer.head !== null && head === undefined) {
    return yield* failure(`commit ${answer.head} is missing from the checkout (run grove pull)`, "missing_object")
  }
  let snapshot: Snapshot = sent ?? new Map()
  if (head !== undefined && sent === undefined) {
    const flat = Objects.FileChanges.flattenTree(head.manifest_hash, ApiPullCompact.treeLookup(trees))
    if (!flat.ok) return yield* failure(flat.reason, "missing_object")
    snapshot = flat.files
    if (onFiles !== undefined && snapshot.size > 0) onFiles(snapshot, freshWanted(snapshot, answer.blobs, new Set(answer.restricted_blobs ?? [])))
  }
  return { answer, trees, snapshot } satisfies FreshBranch
})

/**
 * A whole branch's head files and the blobs a new checkout of them downloads, from its pull answer as parsed, before
 * the decode: what `uncheckedFiles` and `freshWanted` give for the decoded answer when the decode passes (it checks
 * and keeps these values as they are). Undefined when the answer is not of the expected shape (the decode then says
 * what is wrong) or its trees cannot be walked unchecked.
 */
const parsedFiles = (json: unknown, compact: boolean): { readonly snapshot: Snapshot; readonly wanted: Array<IncomingBlob> } | undefined => {
  try {
    const answer = json as Partial<PullAnswer> | null
    if (typeof answer !== "object" || answer === null || !Array.isArray(answer.commits) || !Array.isArray(answer.trees) || !Array.isArray(answer.blobs)) return undefined
    if (typeof answer.head !== "string") return undefined
    const head = answer.commits.find((commit) => commit?.hash === answer.head)
    if (typeof head?.manifest_hash !== "string" || !answer.trees.every((tree) => Array.isArray(tree?.entries))) return undefined
    const snapshot = uncheckedFiles(answer.trees, head.manifest_hash)
    if (snapshot === undefined) return undefined
    const blobs = compact ? ApiPullCompact.expandBlobs(answer.blobs as ReadonlyArray<ApiPullCompact.CompactBlobData>) : answer.blobs
    const restricted = Array.isArray(answer.restricted_blobs) ? answer.restricted_blobs : []
    return { snapshot, wanted: freshWanted(snapshot, blobs, new Set(restricted)) }
  } catch {
    // A value of another shape somewhere: the decode refuses it.
    return undefined
  }
}

/**
 * The files under `root` in trees not checked yet, or undefined when the walk fails or reads more entries than the
 * trees hold (a cycle, which only an unchecked tree can make, or shared subtrees): the caller then checks first.
 */
const uncheckedFiles = (sent: ReadonlyArray<ApiSync.TreeData>, root: string): Snapshot | undefined => {
  const lookup = ApiPullCompact.treeLookup(sent)
  let budget = 0
  for (const tree of sent) budget += tree.entries.length
  const flat = Objects.FileChanges.flattenTree(root, (hash) => {
    const entries = lookup(hash)
    if (entries === undefined || (budget -= entries.length) < 0) return undefined
    return entries
  })
  return flat.ok ? flat.files : undefined
}

/**
 * The blobs `materialize` downloads for a new checkout of `snapshot` (nothing kept locally, the answer's withheld
 * blobs left out): each once, in the snapshot's order, with the answer's chunk lists.
 */
const freshWanted = (snapshot: Snapshot, refs: ReadonlyArray<IncomingBlob>, withheld: ReadonlySet<string>): Array<IncomingBlob> => {
  const byHash = new Map(refs.map((b) => [b.hash, b]))
  const wanted = new Map<string, IncomingBlob>()
  for (const entry of snapshot.values()) {
    if (withheld.has(entry.hash) || wanted.has(entry.hash)) continue
    // Sizes unknown here come back from blobs/info along with the chunk lists.
    wanted.set(entry.hash, byHash.get(entry.hash) ?? { hash: entry.hash, size: 1 })
  }
  return [...wanted.values()]
}

/** Stores a checked branch's history in a new checkout; the caller runs it while the files download. */
export const storeFresh = (workspace: Workspace, fresh: FreshBranch): Effect.Effect<void, CliFailure> =>
  writeHistory(workspace, fresh.trees, fresh.answer.commits, true)

export interface MaterializeResult {
  readonly written: number
  readonly removed: number
  readonly downloadedBlobs: number
  /** Files of `to` left out because the server withholds them from this caller (path permissions). */
  readonly withheld: number
}

/**
 * Makes the working tree hold `to` (it holds `from` now, as `index` records). Blob bytes come from
 * the local blob store, from files already in the tree, and otherwise from the server (`refs` says
 * how they are chunked; unknown ones are asked for with `blobs/info`).
 */
export const materialize = (
  workspace: Workspace,
  remote: RemoteRepo | undefined,
  from: Snapshot,
  to: Snapshot,
  index: ReadonlyMap<string, IndexEntry>,
  refs: ReadonlyArray<IncomingBlob>,
  /** The commit `to` is, when the tree and `index` hold exactly `from`: the new index then holds exactly it. */
  toCommit: string | null = null,
  /**
   * A clone only (its caller removes the whole checkout if it fails): downloaded files are written where they go
   * as they arrive. Elsewhere (a pull, a switch) a failed download must leave the tree as it was, so files wait in
   * `.grove/tmp` until applySnapshot.
   */
  direct = false,
  /** Called once the files' first requests are sent, or at once when nothing is to be downloaded. */
  onRequested?: () => void,
  /** Requests sent already for the files (a clone's, from `fetchEarly`). */
  early?: EarlyFetch
): Effect.Effect<MaterializeResult, CliFailure> =>
  Effect.gen(function*() {
    const { root } = workspace
    // The checkout's own config, key and state live in `.grove/`, and the walk skips a `.grove` at any depth (a file
    // written there would read as deleted): a tree holding one anywhere is refused, whatever the server (older servers
    // accept such paths), before anything is written. One regular expression test a path for most (dotGroveIn).
    for (const file of to.keys()) {
      const reserved = Objects.Tree.dotGroveIn(file)
      if (reserved !== undefined) {
        return yield* failure(
          `the repository holds '${reserved}${reserved === file ? "" : "/"}', which a checkout takes for '.grove' (where grove keeps a checkout's own files, at any depth): not written`,
          "reserved_path"
        )
      }
    }
    // Files the server withholds are neither fetched nor written (nor removed: they were never here).
    const withheld = readWithheld(root)
    const withheldFiles = countWithheld(to, withheld)
    from = withoutWithheld(from, withheld)
    to = withoutWithheld(to, withheld)
    // A clone's checkout is new: nothing is kept locally yet, so no blob is looked for there (a stat per file).
    const fresh = direct && from.size === 0 && index.size === 0
    const kept = new Map<string, string>()
    let list: ReadonlyArray<IncomingBlob>
    if (fresh) {
      // Every file's blob, each once: the list the early requests were planned from when it is the same snapshot.
      list = early !== undefined && early.snapshot === to ? early.wanted : freshWanted(to, refs, new Set())
    } else {
      const present = new Set([...from.values()].map((f) => f.hash))
      const wanted = new Map<string, IncomingBlob>()
      const byHash = new Map(refs.map((r) => [r.hash, r]))
      for (const [file, entry] of to) {
        const current = from.get(file)
        if (current !== undefined && current.hash === entry.hash && current.mode === entry.mode) continue
        if (present.has(entry.hash) || kept.has(entry.hash) || wanted.has(entry.hash)) continue
        if (yield* workspace.objects.hasBlob(entry.hash)) {
          kept.set(entry.hash, blobPath(root, entry.hash))
          continue
        }
        wanted.set(entry.hash, byHash.get(entry.hash) ?? { hash: entry.hash, size: -1 })
      }
      // Sizes unknown here come back from blobs/info along with the chunk lists.
      list = [...wanted.values()].map((b) => b.size < 0 ? { hash: b.hash, size: 1 } : b)
    }
    const downloadDir = path.join(tempDir(root), `download-${process.pid}-${Date.now()}`)
    let downloaded = new Map<string, string>()
    const placer = fresh ? directPlacer(root, to) : undefined
    if (list.length > 0) {
      if (remote === undefined) return yield* failure("the content of some files is not in this checkout and there is no server to fetch it from", "missing_object")
      downloaded = yield* downloadBlobs(remote, list, downloadDir, placer?.place, onRequested, early)
    } else onRequested?.()
    // The files placed and the index written are one step an interruption waits for: `io` does not wait for its
    // promise when interrupted, so a clone's undo could otherwise remove the checkout while a write still runs and
    // re-creates it (a clone whose key is refused just then).
    return yield* Effect.uninterruptible(Effect.gen(function*() {
      const placed = placer?.placed ?? new Map<string, IndexEntry>()
      const result = yield* applySnapshot(
        root,
        from,
        placed.size === 0 ? to : new Map([...to].filter(([file]) => !placed.has(file))),
        (hash) => kept.get(hash) ?? downloaded.get(hash),
        index,
        (file) => file.startsWith(downloadDir)
      ).pipe(Effect.ensuring(io("cannot clean up", () => fs.rm(downloadDir, { recursive: true, force: true })).pipe(Effect.ignore)))
      // The index in the snapshot's order, as if every file had gone through applySnapshot.
      const files = placed.size === 0 ? result.files : new Map([...to.keys()].map((file) => [file, placed.get(file) ?? result.files.get(file)!]))
      yield* writeIndex(root, files, toCommit)
      return { written: result.written + placed.size, removed: result.removed, downloadedBlobs: list.length, withheld: withheldFiles }
    }))
  })
