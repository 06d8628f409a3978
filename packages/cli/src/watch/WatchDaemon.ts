/**
 * A checkout's file watcher (`grove watch start`), like git's fsmonitor daemon: one background process per checkout
 * that watches every directory of the working tree with inotify (one `fs.watch` per directory, all on libuv's one
 * inotify descriptor, so events arrive in the order the kernel queued them) and answers, on a unix socket under
 * `.grove/watch/`, "which paths changed since token T". The quick commands (NoopPush.ts) then stat only those paths
 * instead of every file. Never a wrong answer, only a "scan everything" (`full`):
 * - a client's cookie file: the answer is sent only after the daemon has seen the cookie's event, so every event
 *   queued before the client asked is in it;
 * - a token from another daemon (restarted), or from before lost events, is unknown: full;
 * - lost events: libuv drops inotify's IN_Q_OVERFLOW without a word, so a drain of many events at once (a quarter of
 *   the kernel's queue, `max_queued_events`) is taken as a possible overflow and forgets every token. Any watcher
 *   error, or a directory that cannot be watched, ends the daemon (clients then scan; `grove watch status` tells);
 * - events still queued for a watch that was closed (a directory moved out or replaced) are dropped by libuv unseen,
 *   so they escape that count: each close is followed by a fence, a file of the daemon's own in the cookies
 *   directory. Until every fence's event has arrived every answer is `full`, and each arrival forgets every token:
 *   all events queued before the close (the only ones dropped) came before the fence, an overflow among them too;
 *   a fence not seen within FENCE_WAIT_MS (lost in an overflow) ends the daemon;
 * - a directory replaced at the same path (`rm -rf a && mkdir a`) is watched again: an inotify watch follows its
 *   inode, and ext4 gives the new directory the freed inode number at once, so any create/remove/move event naming a
 *   watched directory re-watches it (such events never come for a directory that stays);
 * - network and FUSE file systems are refused: writes from other machines make no inotify event there;
 * - a new directory is watched before its listing is read (so nothing made in it after the listing is missed), and
 *   it is itself reported changed, which makes the client scan everything.
 * It ends when the checkout goes away, when its socket is no longer its own, after `GROVE_WATCH_IDLE_HOURS` (4) without
 * a question, or on SIGTERM. No Effect here: it is a small process of its own.
 *
 * Started by WatchControl.ts as `node WatchDaemonMain.ts <checkout root>` (the bundle's `watch-daemon.mjs`).
 */
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { cookieDir, groveAt, IGNORED_NAMES, socketPath, SOCKET_PATH_MAX, type WatchAnswer, type WatchRequest, watchDir } from "./WatchPaths.ts"

/** More changed paths than this since a token: the client scans everything (the stats would cost as much). */
const MAX_CHANGED = 5_000
/** Past this many paths remembered, every token is forgotten (bounded memory). */
const MAX_REMEMBERED = 100_000
/** A client whose cookie is not seen this long gets no answer (it then scans). */
const COOKIE_WAIT_MS = 10_000
const CHECK_EVERY_MS = 30_000
/** A fence (see the header) not seen this long was lost: the daemon ends. */
const FENCE_WAIT_MS = 10_000

/**
 * statfs types (linux/magic.h) where inotify sees only this machine's writes: NFS, SMB/CIFS, FUSE (sshfs, ...), 9p,
 * virtiofs, Ceph, AFS, Coda, GFS2, OCFS2, Lustre. git's fsmonitor likewise refuses remote file systems.
 */
const REMOTE_FILE_SYSTEMS: ReadonlyMap<number, string> = new Map([
  [0x6969, "nfs"],
  [0x517b, "smb"],
  [0xff534d42, "cifs"],
  [0xfe534d42, "smb2"],
  [0x65735546, "fuse"],
  [0x01021997, "9p"],
  [0x6a656a63, "virtiofs"],
  [0x00c36400, "ceph"],
  [0x5346414f, "afs"],
  [0x6b414653, "afs"],
  [0x73757245, "coda"],
  [0x01161970, "gfs2"],
  [0x7461636f, "ocfs2"],
  [0x0bd00bd0, "lustre"]
])

/** The name of the remote file system `dir` is on, or undefined for a local one. */
export const remoteFileSystem = (dir: string): string | undefined =>
  // GROVE_WATCH_TEST_STATFS_TYPE (tests only): the type every directory reports, as on a file system the tests lack.
  REMOTE_FILE_SYSTEMS.get(Number(process.env["GROVE_WATCH_TEST_STATFS_TYPE"] ?? fs.statfsSync(dir).type) >>> 0)

const overflowLimit = (): number => {
  try {
    const max = Number(fs.readFileSync("/proc/sys/fs/inotify/max_queued_events", "utf8").trim())
    return max > 0 ? Math.max(64, Math.floor(max / 4)) : 4096
  } catch {
    return 4096
  }
}

export const runDaemon = (rootArg: string): void => {
  const root = fs.realpathSync(rootArg)
  const sock = socketPath(root)
  const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`)
  // Elsewhere fs.watch is not one ordered inotify queue, which the cookie's guarantee rests on.
  if (process.platform !== "linux") {
    log("not started: the watcher needs Linux's inotify")
    process.exit(2)
  }
  if (Buffer.byteLength(sock) > SOCKET_PATH_MAX) {
    log(`not started: the socket path ${sock} is longer than ${SOCKET_PATH_MAX} bytes`)
    process.exit(2)
  }
  const remote = remoteFileSystem(root)
  if (remote !== undefined) {
    log(`not started: ${root} is on a ${remote} file system, where changes made from other machines make no event`)
    process.exit(2)
  }
  const rootDev = fs.statSync(root).dev
  // Owner-only: the changed paths' names are nobody else's business, and nobody else may write a cookie.
  fs.mkdirSync(cookieDir(root), { recursive: true, mode: 0o700 })
  fs.chmodSync(watchDir(root), 0o700)

  const id = randomUUID().slice(0, 8)
  let seq = 0
  /** Tokens below this are unknown (events may have been lost before it). */
  let validFrom = 0
  const changed = new Map<string, number>()
  /** Each watched directory's watcher. */
  const watchers = new Map<string, { readonly watcher: fs.FSWatcher }>()
  /**
   * Watched directories holding their own `.grove` (another checkout: the walk does not go in, TreeWalk.ts): watched
   * for that `.grove` to come or go, nothing under them.
   */
  const nested = new Set<string>()
  /** Fences written and not seen yet (see the header): every answer is `full` meanwhile. */
  const fences = new Set<string>()
  let fenceSeq = 0
  /** A watch was closed and its fence is not written yet: every answer is `full` meanwhile too. */
  let fenceWanted = false
  const limit = overflowLimit()
  let burst = 0
  let socketIno: number | undefined
  let server: net.Server | undefined
  let lastQuestion = Date.now()
  const idleMs = (Number(process.env["GROVE_WATCH_IDLE_HOURS"]) || 4) * 3_600_000

  const exit = (reason: string, code: number) => {
    log(`exiting: ${reason}`)
    for (const w of watchers.values()) w.watcher.close()
    try {
      if (socketIno !== undefined && fs.statSync(sock).ino === socketIno) fs.unlinkSync(sock)
    } catch {
      // gone already
    }
    server?.close()
    process.exit(code)
  }

  const forgetAll = (why: string) => {
    log(`every token forgotten: ${why}`)
    changed.clear()
    seq++
    validFrom = seq
  }

  const cookies = cookieDir(root)
  const absolute = (rel: string) => rel === "" ? root : `${root}/${rel}`

  /**
   * GROVE_WATCH_TEST_EVENT_DELAY_MS (tests only): every event, the cookies' too, is handled that much later, in order,
   * as on a daemon slow to read its queue; an answer must still wait for the events queued before its question.
   */
  const delayMs = Number(process.env["GROVE_WATCH_TEST_EVENT_DELAY_MS"]) || 0
  const handle = <A extends ReadonlyArray<unknown>>(f: (...args: A) => void) => (...args: A): void => {
    if (delayMs === 0) return f(...args)
    setTimeout(() => f(...args), delayMs)
  }

  /** Watches `rel` and every directory under it: the watch first, then the listing (see the header). */
  const watchTree = (rel: string): void => {
    if (watchers.has(rel)) return
    let watcher: fs.FSWatcher
    try {
      watcher = fs.watch(absolute(rel), { persistent: true }, handle((type: string, name: string | null) => onEvent(rel, type, name)))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "ENOTDIR") return
      return exit(`cannot watch ${rel === "" ? "." : rel}: ${(error as Error).message}`, 1)
    }
    watcher.on("error", (error) => exit(`watcher of ${rel === "" ? "." : rel} failed: ${error.message}`, 1))
    let entries: Array<fs.Dirent>
    try {
      const stats = fs.statSync(absolute(rel))
      // Another file system mounted inside the checkout: refused like the root's when it is a remote one.
      const remote = stats.dev === rootDev ? undefined : remoteFileSystem(absolute(rel))
      if (remote !== undefined) return exit(`${rel} is on a ${remote} file system, where changes made from other machines make no event`, 1)
      entries = fs.readdirSync(absolute(rel), { withFileTypes: true })
    } catch {
      watchers.set(rel, { watcher })
      return // removed meanwhile: its parent's event says so
    }
    watchers.set(rel, { watcher })
    if (rel !== "" && groveAt(absolute(rel), rel, entries) === "checkout") return void nested.add(rel)
    for (const entry of entries) {
      if (entry.isDirectory() && !IGNORED_NAMES.has(entry.name)) watchTree(rel === "" ? entry.name : `${rel}/${entry.name}`)
    }
  }

  /** Closes the watches of `rel` and below, then fences (see the header): events queued for them are dropped unseen. */
  const unwatchTree = (rel: string): void => {
    const prefix = `${rel}/`
    let closed = false
    for (const [dir, w] of watchers) {
      if (dir === rel || dir.startsWith(prefix)) {
        w.watcher.close()
        watchers.delete(dir)
        nested.delete(dir)
        closed = true
      }
    }
    // One fence after every close of this turn (an `rm -rf` of many directories closes many watches at once); answers
    // are `full` until it is seen, which forgets every token again.
    if (!closed || fenceWanted) return
    forgetAll(`stopped watching ${rel}`)
    fenceWanted = true
    setImmediate(writeFence)
  }

  const writeFence = () => {
    fenceWanted = false
    const fence = `.fence-${++fenceSeq}`
    fences.add(fence)
    try {
      fs.writeFileSync(path.join(cookies, fence), "")
    } catch (error) {
      return exit(`cannot write a fence: ${(error as Error).message}`, 1)
    }
    setTimeout(() => {
      if (fences.has(fence)) exit("a fence was not seen (events were lost)", 1)
    }, FENCE_WAIT_MS).unref()
  }

  /** The fence's event: every event queued before it, those dropped for closed watches too, has been read. */
  const fenceSeen = (fence: string) => {
    if (!fences.delete(fence)) return
    forgetAll("a fence was seen")
    fs.rm(path.join(cookies, fence), { force: true }, () => undefined)
  }

  /** A path changed: the next token counts it (events on ignored names move no token, so a quiet tree keeps its token). */
  const note = (rel: string) => {
    seq++
    changed.delete(rel) // re-inserted last: the map stays in seq order
    changed.set(rel, seq)
  }

  const onEvent = (dir: string, type: string, name: string | Buffer | null) => {
    if (++burst === 1) setImmediate(() => (burst = 0))
    if (burst === limit) forgetAll(`${limit} events in one drain (the kernel's queue may have overflowed)`)
    if (name === null) {
      // No name: treat the whole directory as changed (the client then scans everything).
      note(dir)
      return
    }
    const base = String(name)
    const rel = dir === "" ? base : `${dir}/${base}`
    if (dir === "" && base === ".grove") {
      if (!fs.existsSync(path.join(root, ".grove", "config.json"))) exit("the checkout is gone", 0)
      return
    }
    if (base === ".grove" && (nested.has(dir) || fs.lstatSync(absolute(rel), { throwIfNoEntry: false })?.isDirectory() === true)) {
      // A checkout made or gone in `dir`: the walk goes in or stops there now. `dir` itself counts as changed (the client
      // scans), and is watched again to the new depth.
      note(dir)
      unwatchTree(dir)
      watchTree(dir)
      return
    }
    // Nothing else in another checkout is this one's content: the walk lists none of its names.
    if (nested.has(dir)) return
    // Only directories of these names are never content (the walk's rule): a file named `.grove` or `.git` is, and so
    // is its removal (noting a removed directory of that name costs nothing: it is in no index).
    if (IGNORED_NAMES.has(base) && fs.lstatSync(absolute(rel), { throwIfNoEntry: false })?.isDirectory() === true) return
    note(rel)
    // An event on the watched directory itself names it by its base name: count the directory as changed too.
    if (dir !== "" && base === path.basename(dir)) note(dir)
    if (type === "rename") {
      const stats = fs.lstatSync(absolute(rel), { throwIfNoEntry: false })
      if (stats?.isDirectory() === true) {
        // A watch already here may be the old directory's (see the header): watch the one there now.
        unwatchTree(rel)
        watchTree(rel)
      } else unwatchTree(rel)
    }
    if (dir === "" && !fs.existsSync(root)) exit("the checkout is gone", 0)
    if (changed.size > MAX_REMEMBERED) forgetAll(`more than ${MAX_REMEMBERED} paths changed`)
  }

  const answerFor = (since: string | null): WatchAnswer => {
    const token = `${id}:${seq}`
    const pid = process.pid
    const [sinceId, sinceSeqText] = (since ?? "").split(":")
    const sinceSeq = Number(sinceSeqText)
    if (since === null || fences.size > 0 || fenceWanted || sinceId !== id || !Number.isInteger(sinceSeq) || sinceSeq < validFrom || sinceSeq > seq) return { pid, token, full: true }
    const paths: Array<string> = []
    for (const [rel, at] of changed) {
      if (at > sinceSeq) {
        paths.push(rel)
        if (paths.length > MAX_CHANGED) return { pid, token, full: true }
      }
    }
    return { pid, token, changed: paths }
  }

  // Cookies seen before their question arrived, and questions waiting for their cookie.
  const seenCookies = new Set<string>()
  const waiting = new Map<string, { readonly since: string | null; readonly socket: net.Socket }>()
  const reply = (socket: net.Socket, since: string | null) => socket.end(`${JSON.stringify(answerFor(since))}\n`)

  try {
    const cookieWatcher = fs.watch(cookies, { persistent: true }, handle((_type: string, name: string | null) => {
      if (name === null) return
      const cookie = String(name)
      if (cookie.startsWith(".fence-")) return fenceSeen(cookie)
      const question = waiting.get(cookie)
      if (question !== undefined) {
        waiting.delete(cookie)
        reply(question.socket, question.since)
      } else if (seenCookies.size < 1_000) {
        seenCookies.add(cookie)
        setTimeout(() => seenCookies.delete(cookie), COOKIE_WAIT_MS).unref()
      }
    }))
    cookieWatcher.on("error", (error) => exit(`cookie watcher failed: ${error.message}`, 1))
    watchers.set("\0cookies", { watcher: cookieWatcher })
  } catch (error) {
    exit(`cannot watch ${cookies}: ${(error as Error).message}`, 1)
  }
  watchTree("")

  server = net.createServer((socket) => {
    lastQuestion = Date.now()
    let text = ""
    socket.setEncoding("utf8")
    socket.on("error", () => socket.destroy())
    socket.setTimeout(COOKIE_WAIT_MS, () => socket.destroy())
    socket.on("data", (data: string) => {
      text += data
      const end = text.indexOf("\n")
      if (end < 0) {
        if (text.length > 4096) socket.destroy()
        return
      }
      let question: WatchRequest
      try {
        question = JSON.parse(text.slice(0, end)) as WatchRequest
      } catch {
        return void socket.destroy()
      }
      if (typeof question.cookie !== "string" || (question.since !== null && typeof question.since !== "string")) return void socket.destroy()
      if (seenCookies.delete(question.cookie)) return reply(socket, question.since)
      waiting.set(question.cookie, { since: question.since, socket })
      socket.on("close", () => waiting.delete(question.cookie))
    })
  })

  // Once, not per listen(): a retry after a stale socket would add a second callback.
  server.once("listening", () => {
    socketIno = fs.statSync(sock).ino
    log(`watching ${root} (${watchers.size - 1} directories), pid ${process.pid}`)
    process.stdout.on("error", () => undefined) // the starter stops reading once it has read this
    process.stdout.write("ready\n")
  })
  const listen = () => server!.listen(sock)
  server.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EADDRINUSE") return exit(`socket: ${error.message}`, 1)
    // A socket file is there: another daemon's (then leave it be) or a stale one from a daemon that died.
    const probe = net.createConnection(sock)
    probe.on("connect", () => {
      probe.destroy()
      exit("another watcher answers on this checkout's socket", 3)
    })
    probe.on("error", () => {
      try {
        fs.unlinkSync(sock)
      } catch {
        // another starter removed it
      }
      listen()
    })
  })
  listen()

  setInterval(() => {
    if (!fs.existsSync(path.join(root, ".grove", "config.json"))) return exit("the checkout is gone", 0)
    const now = fs.statSync(sock, { throwIfNoEntry: false })
    if (socketIno !== undefined && now?.ino !== socketIno) return exit("the socket is no longer this watcher's", 0)
    if (Date.now() - lastQuestion > idleMs) return exit("idle", 0)
  }, CHECK_EVERY_MS).unref()
  process.on("SIGTERM", () => exit("stopped", 0))
  process.on("SIGINT", () => exit("stopped", 0))
}
