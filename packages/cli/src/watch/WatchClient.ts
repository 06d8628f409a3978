/**
 * The quick commands' side of the watcher (WatchDaemon.ts): "is the working tree still exactly the index?" answered
 * from the paths that changed since the last token under which it was, when a daemon runs for the checkout. Any
 * doubt (no daemon, a restarted one, lost events, the index rewritten, a directory changed, no answer within a
 * second) takes the full check, the stat of every file (TreeStatus.ts). No Effect here.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import { writeJsonAtomic } from "../local/Files.ts"
import {
  type FolderStat,
  type IndexEntry,
  indexFileKey,
  indexKeyOf,
  modeOf,
  readIndexHead,
  statMatches,
  UNSETTLED_CTIME,
  type WorkIndex
} from "../local/TreeStatus.ts"
import { cookieDir, socketPath, tokenStatePath, type WatchAnswer } from "./WatchPaths.ts"

/** How long a client waits for the daemon before it scans instead. */
const ANSWER_WAIT_MS = 1_000

let asked = 0

/**
 * The daemon's answer to "what changed since `since`", or undefined when there is no daemon or no answer in time.
 * The cookie file is written after the question: the daemon answers once it has seen the cookie's event.
 */
export const askWatcher = (root: string, since: string | null): Promise<WatchAnswer | undefined> => {
  const sock = socketPath(root)
  if (!fs.existsSync(sock)) return Promise.resolve(undefined)
  // Unique among live processes by the pid; the rest only tells this process's questions apart. Not node:crypto:
  // loading it (and the streams it needs) is a tenth of a quick command's CPU.
  const cookie = `${process.pid}-${(++asked).toString(36)}${Math.random().toString(36).slice(2, 8)}`
  const cookieFile = `${cookieDir(root)}/${cookie}`
  return new Promise<WatchAnswer | undefined>((resolve) => {
    let text = ""
    let done = false
    const finish = (answer: WatchAnswer | undefined) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      fs.unlink(cookieFile, () => resolve(answer))
    }
    const timer = setTimeout(() => finish(undefined), ANSWER_WAIT_MS)
    const socket = net.createConnection(sock)
    socket.setEncoding("utf8")
    socket.on("error", () => finish(undefined))
    socket.on("close", () => finish(undefined))
    socket.on("connect", () => {
      socket.write(`${JSON.stringify({ since, cookie })}\n`)
      try {
        fs.writeFileSync(cookieFile, "")
      } catch {
        finish(undefined)
      }
    })
    socket.on("data", (data: string) => {
      text += data
      const end = text.indexOf("\n")
      if (end < 0) return
      try {
        const answer = JSON.parse(text.slice(0, end)) as WatchAnswer
        finish(typeof answer.token === "string" && ("full" in answer || Array.isArray(answer.changed)) ? answer : undefined)
      } catch {
        finish(undefined)
      }
    })
  })
}

interface TokenState {
  readonly index: string
  readonly token: string
}

const readTokenState = (root: string): TokenState | undefined => {
  try {
    const state = JSON.parse(fs.readFileSync(tokenStatePath(root), "utf8")) as Partial<TokenState>
    return typeof state.index === "string" && typeof state.token === "string" ? { index: state.index, token: state.token } : undefined
  } catch {
    return undefined
  }
}

/** Keeps `token` for the index file `key`; one not written only costs a full check next time. */
const saveToken = (root: string, key: string, token: string): Promise<void> =>
  writeJsonAtomic(tokenStatePath(root), { index: key, token } satisfies TokenState).catch(() => undefined)

/** What the watcher says about the index file as it is now (read by its head only: see TreeStatus.readIndexHead). */
export interface Look {
  /** The index file (`indexFileKey`) and its base commit. */
  readonly key: string
  readonly base: string | null
  readonly saved: TokenState | undefined
  /** The daemon's answer to "what changed since the token saved for this index file"; undefined: no daemon. */
  readonly answer: WatchAnswer | undefined
  /** Nothing changed since a token saved for this very index file: the tree is the index, settled, as then. */
  readonly quiet: boolean
}

/** The watcher's look at the checkout (undefined when it has no index); a quiet look's newer token is kept. */
export const look = async (root: string): Promise<Look | undefined> => {
  const head = readIndexHead(root)
  if (head === undefined) return undefined
  const saved = readTokenState(root)
  const answer = await askWatcher(root, saved?.index === head.key ? saved.token : null)
  const quiet = answer !== undefined && saved?.index === head.key && !("full" in answer) && answer.changed.length === 0
  if (quiet && answer.token !== saved.token) await saveToken(root, head.key, answer.token)
  return { ...head, saved, answer, quiet }
}

/**
 * Whether the changed paths leave the tree as the index records it: true, false (a file differs), or undefined
 * (cannot tell this way: a directory was made, removed, renamed or touched, or an entry without a ctime).
 */
const pathsUnchanged = (root: string, index: WorkIndex, paths: ReadonlyArray<string>): boolean | undefined => {
  if (paths.length === 0) return true
  const files: ReadonlyMap<string, IndexEntry> = index.files
  for (const file of paths) {
    if (file === "" || index.folders.has(file)) return undefined
    const stats = fs.lstatSync(`${root}/${file}`, { throwIfNoEntry: false })
    const known = files.get(file)
    if (known === undefined) {
      if (stats === undefined) continue // made and removed since: never content
      if (stats.isDirectory()) return undefined
      if (stats.isFile() || stats.isSymbolicLink()) return false // a new file
      continue // sockets, FIFOs and devices are not content
    }
    if (known.ctimeMs === undefined) return undefined
    const symlink = known.mode === "symlink"
    if (stats === undefined || stats.isSymbolicLink() !== symlink || !statMatches(known, stats, symlink, index.writtenAt) || modeOf(stats, symlink) !== known.mode) {
      return false
    }
  }
  return true
}

/** What a full check found: `same` answers the question; `settled` means it is worth a token (see below). */
export interface FullCheck {
  readonly same: boolean
  /** The index's columns and every directory showed it (TreeStatus.columnsUnchanged with ctimes): a scan writes nothing. */
  readonly settled: boolean
}

/**
 * Whether the tree at `root` is exactly `index`: from the watcher's changed paths (`seen`, a look at this index file)
 * when the last token is still good for it, else from `fullCheck`. A token is kept only after a settled "same", taken
 * before that check began: every change after it is in the next answer, every change before it was seen by the check.
 */
export const treeUnchangedWatched = async (root: string, index: WorkIndex, fullCheck: () => FullCheck, seen: Look): Promise<FullCheck> => {
  const { answer, key, saved } = seen
  if (answer === undefined || indexFileKey(index) !== key) return fullCheck()
  if (seen.quiet) return { same: true, settled: true }
  let result: FullCheck
  if ("full" in answer || saved?.index !== key) result = fullCheck()
  else {
    const same = pathsUnchanged(root, index, answer.changed)
    result = same === undefined ? fullCheck() : { same, settled: same }
  }
  if (result.same && result.settled && (saved?.index !== key || saved.token !== answer.token)) await saveToken(root, key, answer.token)
  return result
}

/** The daemon's token now (after its cookie), for a scan about to start; undefined when no daemon answers. */
export const tokenBeforeScan = async (root: string): Promise<string | undefined> =>
  fs.existsSync(socketPath(root)) ? (await askWatcher(root, null))?.token : undefined

/**
 * Keeps `token` (from `tokenBeforeScan`) for the index just written from that scan (`stats`: the file's), when the
 * quick check would call it settled: every directory settled, every entry with a ctime and older than the index.
 */
export const tokenForWrittenIndex = async (
  root: string,
  token: string,
  stats: Pick<import("node:fs").Stats, "ino" | "mtimeMs" | "size">,
  writtenAt: number,
  files: ReadonlyMap<string, IndexEntry>,
  folders: ReadonlyMap<string, FolderStat>
): Promise<void> => {
  if (!folders.has("")) return
  for (const f of folders.values()) if (f.ctimeMs === UNSETTLED_CTIME) return
  const before = Math.min(writtenAt, stats.mtimeMs)
  for (const e of files.values()) if (e.ctimeMs === undefined || e.mtimeMs >= before) return
  await saveToken(root, indexKeyOf(root, stats), token)
}
