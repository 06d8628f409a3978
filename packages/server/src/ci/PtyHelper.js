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
 * Out: ["d", id, text]  output; ["x", id, exitCode, signal]  exited, after its last output;
 *      ["e", id, message]  could not be started (no "x" follows).
 * The end of stdin (the server gone, however it ended) kills every process group still here, then exits.
 */
import { createRequire } from "node:module"
import { createInterface } from "node:readline"

// node-pty is a native CommonJS addon.
const pty = createRequire(import.meta.url)("node-pty")

/** @type {Map<number, import("node-pty").IPty>} */
const live = new Map()

// A pipe: synchronous writes (Linux), so replies keep their order and a slow reader holds the steps back.
/** @param {ReadonlyArray<unknown>} message */
const reply = (message) => process.stdout.write(`${JSON.stringify(message)}\n`)

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
    child = pty.spawn(file, args, {
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
createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on("line", (line) => {
    const [kind, id, ...rest] = JSON.parse(line)
    if (kind === "s") start(id, rest[0], rest[1], rest[2], rest[3], rest[4], rest[5])
    else if (kind === "w") live.get(id)?.write(rest[0])
    else if (kind === "k") {
      const child = live.get(id)
      if (child !== undefined) killGroup(child.pid)
    }
  })
  .on("close", shutDown)
