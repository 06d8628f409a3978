/**
 * Run by PtySpawner.ts in a process of its own (one per server, small heap): starts CI steps'
 * processes in pseudo-terminals (node-pty) and relays their terminals. node-pty forks the process
 * that calls it; forking this one, not the ~200 MB server, keeps that copy small and off the server.
 *
 *   node PtyHelper.js     (requests on stdin, replies on stdout: one JSON array a line)
 *
 * Plain JavaScript: a .ts entry would load Node's type stripper too (~17 MB more RSS in this process).
 *
 * In:  ["s", id, file, args, cwd, env, uid | null, gid | null]  start; ["w", id, text]  write to its terminal;
 *      ["k", id]  kill its whole process group (SIGKILL).
 * Lines end at "\n" only (JSON may hold U+2028 and U+2029 as they are).
 * Out: ["d", id, text]  output; ["x", id, exitCode, signal]  exited, after its last output;
 *      ["e", id, message]  could not be started (no "x" follows).
 * The end of stdin (the server gone, however it ended) kills every process group still here, then exits.
 */
import { accessSync, constants } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"

// node-pty is a native CommonJS addon.
const pty = createRequire(import.meta.url)("node-pty")

/**
 * native/exec-clean.c, built by npm install: closes every descriptor above 2, then runs the step's program. forkpty's
 * child inherits this process's other terminal masters (not close-on-exec), and bwrap and pasta pass them on: without
 * it a step could read or type into another step's terminal, or a waiting sandbox's. Undefined where it was not built.
 */
const EXEC_CLEAN = (() => {
  const file = fileURLToPath(new URL("../../native/build/Release/grove_exec", import.meta.url))
  try {
    accessSync(file, constants.X_OK)
    return file
  } catch {
    process.stderr.write(`grove CI: ${file} is missing (npm install builds it): steps' terminals inherit each other's\n`)
    return undefined
  }
})()

/** @type {Map<number, import("node-pty").IPty>} */
const live = new Map()

// stdout is a socket: writes queue without bound. While the server has not taken what was written, every
// terminal stops being read, so the steps wait on their own output (as they did on node-pty in the server).
let blocked = false
/** Terminals' destroys held while blocked (keepWhileBlocked): run 200 ms after the drain, from its one listener. */
/** @type {Array<() => unknown>} */
let heldDestroys = []
/** @param {ReadonlyArray<unknown>} message */
const reply = (message) => {
  if (process.stdout.write(`${JSON.stringify(message)}\n`) || blocked) return
  blocked = true
  for (const child of live.values()) child.pause()
  process.stdout.once("drain", () => {
    blocked = false
    for (const child of live.values()) child.resume()
    if (heldDestroys.length === 0) return
    const due = heldDestroys
    heldDestroys = []
    setTimeout(() => {
      for (const destroy of due) destroy()
    }, 200)
  })
}

/**
 * node-pty (1.1.0) destroys a terminal's socket 200 ms after its process exited when it has not closed by then, and
 * what was still unread is lost: a terminal paused here (above) that long lost its last output, the exit marker with
 * it (its step's end then waited for pasta's). While blocked that destroy waits; after the resume, 200 ms more.
 * @param {import("node-pty").IPty} child
 */
const keepWhileBlocked = (child) => {
  /** @type {{ destroy: (...args: Array<unknown>) => unknown } | undefined} */
  const socket = /** @type {any} */ (child)._socket
  if (socket === undefined) return
  const destroy = socket.destroy.bind(socket)
  // Only node-pty's timer calls it with no error while paused (a paused socket reads nothing: no EOF, no EIO).
  socket.destroy = (...args) => {
    if (!blocked || args.length > 0) return destroy(...args)
    heldDestroys.push(() => destroy())
    return socket
  }
}

/**
 * Each "\n"-ended line of `stream`. JSON.stringify writes no raw "\n"; readline would also end a line at U+2028 and
 * U+2029, which JSON leaves as they are.
 * @param {NodeJS.ReadableStream} stream @param {(line: string) => void} onLine
 */
const eachLine = (stream, onLine) => {
  let held = ""
  stream.setEncoding("utf8")
  stream.on("data", (text) => {
    const lines = (held + text).split("\n")
    held = lines.pop() ?? ""
    for (const line of lines) onLine(line)
  })
}

/** @param {number} pid */
const killGroup = (pid) => {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGKILL")
    } catch {
      // Already gone.
    }
  }
}

/**
 * @param {number} id @param {string} file @param {Array<string>} args @param {string} cwd
 * @param {Record<string, string>} env @param {number | null} uid @param {number | null} gid
 */
const start = (id, file, args, cwd, env, uid, gid) => {
  let child
  try {
    // Through EXEC_CLEAN when this process starts it (setpriv switches users): a uid given here applies first, and
    // that user may not reach the file (shared runner without setpriv only).
    const clean = EXEC_CLEAN !== undefined && (uid === null || gid === null)
    child = pty.spawn(clean ? EXEC_CLEAN : file, clean ? [file, ...args] : args, {
      name: "xterm",
      cols: 120,
      rows: 40,
      cwd,
      env,
      ...(uid === null || gid === null ? {} : { uid, gid })
    })
  } catch (error) {
    reply(["e", id, String(error)])
    return
  }
  live.set(id, child)
  keepWhileBlocked(child)
  if (blocked) child.pause()
  child.onData((text) => reply(["d", id, text]))
  child.onExit(({ exitCode, signal }) => {
    live.delete(id)
    reply(["x", id, exitCode, signal ?? 0])
  })
}

/** Ends every process group still here, then this process: the server is gone. */
const shutDown = () => {
  for (const child of live.values()) killGroup(child.pid)
  process.exit(0)
}

process.stdout.on("error", shutDown)
process.stdin.on("end", shutDown)
process.stdin.on("close", shutDown)
eachLine(process.stdin, (line) => {
  let message
  try {
    message = JSON.parse(line)
  } catch {
    // Not what the server writes: this helper cannot be trusted to follow it any more.
    shutDown()
    return
  }
  const [kind, id, ...rest] = message
  if (kind === "s") start(id, rest[0], rest[1], rest[2], rest[3], rest[4], rest[5])
  else if (kind === "w") live.get(id)?.write(rest[0])
  else if (kind === "k") {
    const child = live.get(id)
    if (child !== undefined) killGroup(child.pid)
  }
})
