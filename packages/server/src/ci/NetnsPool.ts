/**
 * Network namespaces for network-on sandboxes, each made and served by one pasta, kept across steps. Starting pasta
 * is most of a network-on step's CPU (~28 ms: it clears ~30 MB of buffers at start); entering a namespace that one
 * already serves costs an nsenter (~0.5 ms). Only when the server runs as root (every job its own host uid): the
 * server joins the namespace for the step (nsenter, as root), then setpriv makes it the job's user, then bwrap.
 *
 * What a step can leave in a namespace, and why the next step cannot meet it:
 * - Processes: none. The step's sandbox is its own PID namespace; once bwrap has exited, every process in it is gone.
 *   A namespace is given back only after a normal exit (not killed, not lost with the process starter).
 * - Traces of traffic (tcp_metrics: the peers a connection went to, with their RTT; neighbour entries; counters):
 *   a step that sent anything is followed by a fresh namespace. Its protocol counters (usedNetwork: TCP opens and
 *   segments sent, UDP and ICMP datagrams sent) are read when the step takes the namespace and after it; any change
 *   retires it (pasta ends, a new one is made). Those counters move only when a socket in the namespace sends, never
 *   by the kernel's own packets on a new interface (router and neighbour solicitations, MLD: Icmp6 and link counters,
 *   not read). A step that sent nothing (no-op, offline) leaves the namespace as it found it, bar those.
 * - Sockets (listening, bound, TIME_WAIT, unix including abstract ones): read from the namespace's /proc/net tables
 *   after the step; any entry retires the namespace.
 * - Addresses and routes: the step has no capability over the namespace (its user namespace is not the owner's,
 *   pasta's), so it cannot change them; they are compared with the namespace's first state all the same.
 * - Files: none live in a network namespace (each sandbox has its own root, /tmp and checkout).
 * A namespace serves at most MAX_USES steps, one at a time, then is retired. Any doubt retires it.
 * Not reset, for the next step: what the kernel sends by itself (Icmp6 and link counters); no step's doing.
 *
 * Each namespace's pasta runs as a host uid of its own from the jobs' range (Sandbox.reserveUser), so no job's user
 * owns it. The server holds an open descriptor of each namespace (not a pid: a pid can be reused; the descriptor
 * keeps that very namespace) and steps enter it through /proc/<server>/fd/<n>.
 */
import { Effect, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import type { Socket } from "node:net"
import { type Command, type Isolation, PASTA_ARGS, releaseUser, reserveId, type RunUser, which } from "./Sandbox.ts"

/** Steps one namespace serves before it is retired. */
export const MAX_USES = 256

/** A namespace lent to one step until its process exits. */
export interface Lease {
  /** What nsenter's --net takes: this server's descriptor of the namespace. */
  readonly path: string
  /** Called once with the step's process exit: the namespace is checked and kept, or retired. */
  readonly done: (exit: { readonly exitCode: number; readonly signal: number }) => void
}

export interface NetnsPool {
  /** A free namespace, or undefined: the step starts its own pasta; another namespace is made meanwhile (up to the pool's size). */
  readonly take: () => Lease | undefined
  /** Namespaces made and not retired (tests, bench). */
  readonly size: () => number
}

export interface PoolTools {
  readonly pasta: string
  readonly setpriv: string
  readonly uidBase: number
}

interface Slot {
  readonly pasta: ChildProcess
  readonly holder: number
  readonly link: string
  readonly fd: number
  readonly user: RunUser
  readonly shape: string
  uses: number
  /** When it was last made or given back free (Date.now()). */
  freeSince: number
  /**
   * Its send counters as the last step's check read them (sentCounters), the next step's starting point: not read
   * again at the take. Anything sent in between shows at that step's check and retires it too.
   */
  sent: string | undefined
}

/**
 * The /proc/net tables of sockets that list only the namespace's own: just their header line in a clean namespace.
 * TCP, UDP and raw sockets are counted from sockstat instead: their tables walk the host's whole hash (~1.5 ms each).
 */
const SOCKET_TABLES = ["icmp", "icmp6", "unix", "packet"]

/**
 * Whether the namespace's own counts in sockstat(6) are all 0: TCP, UDP, UDP-Lite and raw sockets in use, TCP's
 * TIME_WAIT, fragments waiting (the other numbers there are the host's). Without TCP's lines read: not clean.
 */
const noSockets = (holder: number): boolean => {
  const text = fs.readFileSync(`/proc/${holder}/net/sockstat`, "utf8") + fs.readFileSync(`/proc/${holder}/net/sockstat6`, "utf8")
  if (!/^TCP: inuse \d+ orphan \d+ tw \d+/m.test(text) || !/^TCP6: inuse \d+/m.test(text)) return false
  return [...text.matchAll(/\b(?:inuse|tw) (\d+)/g)].every((match) => match[1] === "0")
}

/**
 * The namespace's addresses and routes, without what changes by itself (an address's tentative flag, a route's
 * use counts, the link-local and multicast entries that come with duplicate address detection).
 */
const shapeOf = (holder: number): string => {
  const read = (name: string) => fs.readFileSync(`/proc/${holder}/net/${name}`, "utf8").split("\n").filter((line) => line !== "")
  const v6 = (line: string) => !/^(fe80|ff)/.test(line)
  const route = read("route").map((line) => line.trim())
  const addresses = read("if_inet6").filter(v6).map((line) => line.trim().split(/\s+/).filter((_, i) => i !== 4).join(" "))
  const routes6 = read("ipv6_route").filter(v6).map((line) => line.trim().split(/\s+/).filter((_, i) => i < 5 || i > 7).join(" "))
  return [...route, ...addresses, ...routes6].join("\n")
}

/** The counters in snmp (name pairs: section, field) and snmp6 that move when, and only when, a socket sends. */
const SENT_V4: ReadonlyArray<readonly [string, string]> = [
  ["Tcp", "ActiveOpens"], ["Tcp", "PassiveOpens"], ["Tcp", "OutSegs"], ["Udp", "OutDatagrams"], ["UdpLite", "OutDatagrams"], ["Icmp", "OutMsgs"]
]
const SENT_V6 = new Set(["Udp6OutDatagrams", "UdpLite6OutDatagrams", "Icmp6OutEchos"])

/** The namespace's send counters (SENT_V4, SENT_V6) as one string; undefined when they cannot be read. */
export const sentCounters = (holder: number): string | undefined => {
  try {
    const lines = fs.readFileSync(`/proc/${holder}/net/snmp`, "utf8").split("\n")
    const values: Array<string> = []
    for (const [section, field] of SENT_V4) {
      const names = lines.find((line) => line.startsWith(`${section}: `) && /[A-Za-z]/.test(line.slice(section.length + 2)))
      const counts = names === undefined ? undefined : lines[lines.indexOf(names) + 1]
      const at = names?.split(" ").indexOf(field) ?? -1
      // UdpLite is missing on kernels without it: nothing can have sent through it.
      if (at === -1 || counts === undefined) {
        if (section === "UdpLite") continue
        return undefined
      }
      values.push(counts.split(" ")[at]!)
    }
    for (const line of fs.readFileSync(`/proc/${holder}/net/snmp6`, "utf8").split("\n")) {
      const [name, value] = line.split(/\s+/)
      if (SENT_V6.has(name!)) values.push(`${name}=${value}`)
    }
    return values.join(" ")
  } catch {
    return undefined
  }
}

/**
 * Whether the holder is alive and still in the namespace, nothing was sent from it since `sent` (sentCounters at
 * the take), no socket is open in it, and its shape is the first one: then its send counters, else undefined.
 */
const clean = (slot: Slot, sent: string | undefined): string | undefined => {
  try {
    if (fs.readlinkSync(`/proc/${slot.holder}/ns/net`) !== slot.link) return undefined
    if (sent === undefined || sentCounters(slot.holder) !== sent) return undefined
    for (const table of SOCKET_TABLES) {
      let text: string
      try {
        text = fs.readFileSync(`/proc/${slot.holder}/net/${table}`, "utf8")
      } catch (error) {
        // A table this kernel does not have (icmp6 without IPv6): nothing can be in it.
        if ((error as NodeJS.ErrnoException).code === "ENOENT") continue
        return undefined
      }
      if (text.indexOf("\n") !== text.length - 1) return undefined
    }
    if (!noSockets(slot.holder)) return undefined
    if (shapeOf(slot.holder) !== slot.shape) return undefined
    // Read through the holder's pid: still the same namespace after the reads.
    return fs.readlinkSync(`/proc/${slot.holder}/ns/net`) === slot.link ? sent : undefined
  } catch {
    return undefined
  }
}

/**
 * The namespace's holder: prints its host pid and its namespace, then waits for the end of its stdin, the server's
 * pipe: the server gone however it ended, the holder ends, and pasta with it (nothing is left running).
 */
const HOLDER = 'read -r pid rest < /proc/self/stat && echo "$pid $(readlink /proc/self/ns/net)" && exec cat > /dev/null'

/** Starts pasta with a holder in its namespace, as `user`; resolves once the server holds the namespace's descriptor. */
const makeSlot = (tools: PoolTools, user: RunUser): Promise<Slot> =>
  new Promise((resolve, reject) => {
    const argv = [tools.pasta, "-f", ...PASTA_ARGS, "--", "/bin/sh", "-c", HOLDER]
    // Its own process group: pasta and the holder are ended together.
    const pasta = spawn(tools.setpriv, [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", ...argv], { detached: true, stdio: ["pipe", "pipe", "ignore"], env: { PATH: "/usr/bin:/bin" } })
    // Neither keeps the server running.
    pasta.unref()
    const stdin = pasta.stdin as Socket
    stdin.unref()
    pasta.stdin!.on("error", () => undefined)
    let seen = ""
    const fail = (why: string) => {
      kill(pasta)
      reject(new Error(`a CI network namespace could not be made: ${why}`))
    }
    pasta.on("error", (error) => fail(error.message))
    pasta.on("exit", (code, signal) => fail(`pasta ended (${signal ?? `exit ${code}`})`))
    pasta.stdout!.setEncoding("utf8")
    pasta.stdout!.on("data", (text: string) => {
      seen += text
      if (!seen.endsWith("\n")) return
      pasta.stdout!.destroy()
      const match = /^(\d+) (net:\[\d+\])\n$/.exec(seen)
      if (match === null) return fail(`the holder said ${JSON.stringify(seen.slice(0, 200))}`)
      const holder = Number(match[1])
      const link = match[2]!
      try {
        // The holder's group is pasta's (so a kill of that group ends both), and the descriptor is of its namespace.
        if (fs.readFileSync(`/proc/${holder}/stat`, "utf8").replace(/^.*\) /, "").split(" ")[2] !== String(pasta.pid)) return fail("the holder is not in pasta's group")
        const fd = fs.openSync(`/proc/${holder}/ns/net`, "r")
        if (`net:[${fs.fstatSync(fd).ino}]` !== link) {
          fs.closeSync(fd)
          return fail("the namespace changed under its holder")
        }
        pasta.removeAllListeners("exit")
        resolve({ pasta, holder, link, fd, user, shape: shapeOf(holder), uses: 0, freeSince: Date.now(), sent: undefined })
      } catch (error) {
        fail(String(error))
      }
    })
  })

const kill = (pasta: ChildProcess) => {
  try {
    process.kill(-pasta.pid!, "SIGKILL")
  } catch {
    // Gone already.
  }
}

/** How long a free namespace beyond the first is kept unused (each holds ~31 MB of host memory: pasta's buffers). */
export const IDLE_MS = 60_000

/**
 * Keeps up to `size` namespaces from the first take while the scope lasts; they are ended with it. Free ones unused
 * for `idleMs` are retired, all but one: a busy node keeps what its runners use, a quiet one little more than its
 * warm sandboxes' (those hold theirs while they wait).
 */
export const make = (tools: PoolTools, size: number, idleMs = IDLE_MS): Effect.Effect<NetnsPool, never, Scope.Scope> =>
  Effect.gen(function*() {
    const free: Array<Slot> = []
    const all = new Set<Slot>()
    let making = 0
    let failures = 0
    let closed = false

    const retire = (slot: Slot) => {
      all.delete(slot)
      kill(slot.pasta)
      try {
        fs.closeSync(slot.fd)
      } catch {
        // Closed already.
      }
      releaseUser(slot.user)
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        free.length = 0
        // retire deletes from the set: iterating a Set visits no deleted entry and skips none left.
        for (const slot of all) retire(slot)
      })
    )

    // Three failures in a row: no more namespaces (every step starts its own pasta, as without the pool).
    const grow = () => {
      if (closed || failures >= 3 || all.size + making >= size) return
      making++
      const user = reserveId(tools.uidBase)
      makeSlot(tools, user).then(
        (slot) => {
          making--
          failures = 0
          if (closed) return void (kill(slot.pasta), fs.closeSync(slot.fd), releaseUser(user))
          all.add(slot)
          free.push(slot)
          slot.freeSince = Date.now()
        },
        (error) => {
          making--
          failures++
          releaseUser(user)
          Effect.runFork(Effect.logWarning("CI: a network namespace could not be made ahead; steps start their own pasta", error))
        }
      )
    }

    /** Whether its holder (and so pasta) still runs in it. */
    const serving = (slot: Slot) => {
      try {
        return fs.readlinkSync(`/proc/${slot.holder}/ns/net`) === slot.link
      } catch {
        return false
      }
    }

    const take = (): Lease | undefined => {
      let slot = free.pop()
      while (slot !== undefined && !serving(slot)) {
        retire(slot)
        slot = free.pop()
      }
      if (free.length === 0) grow()
      if (slot === undefined) return undefined
      slot.uses++
      const sent = slot.sent ?? sentCounters(slot.holder)
      slot.sent = undefined
      let given = false
      return {
        path: `/proc/${process.pid}/fd/${slot.fd}`,
        done: ({ signal }) => {
          if (given) return
          given = true
          const after = !closed && all.has(slot) && signal === 0 && slot.uses < MAX_USES ? clean(slot, sent) : undefined
          if (after !== undefined) {
            slot.sent = after
            slot.freeSince = Date.now()
            free.push(slot)
          }
          else if (all.has(slot)) {
            retire(slot)
            grow()
          }
        }
      }
    }
    // take() pops the most recently given back: the ones at the front are the longest unused.
    yield* Effect.forkScoped(Effect.forever(Effect.sleep(idleMs / 2).pipe(Effect.andThen(Effect.sync(() => {
      while (free.length > 1 && free[0]!.freeSince < Date.now() - idleMs) retire(free.shift()!)
    })))))
    return { take, size: () => all.size }
  })

/** `isolation` with a pool of `size` namespaces when it can have one (sandboxed, server as root, nsenter there); else as it is. */
export const pooled = (isolation: Isolation | undefined, size: number): Effect.Effect<Isolation | undefined, never, Scope.Scope> =>
  Effect.gen(function*() {
    if (isolation?._tag !== "Sandboxed" || isolation.setpriv === undefined) return isolation
    const nsenter = yield* Effect.promise(() => which("nsenter"))
    if (nsenter === undefined) return isolation
    const pool = yield* make({ pasta: isolation.pasta, setpriv: isolation.setpriv, uidBase: isolation.uidBase }, size)
    return { ...isolation, netns: { pool, nsenter } }
  })

/**
 * A step's command, with its pooled namespace (if it took one) given back when the scope closes at the latest: its
 * process's exit gives it back before then; a step cancelled before its process started gives it back there (retired,
 * as after a kill). Taken and guarded in one go: no interruption in between.
 */
export const guarded = (command: Effect.Effect<Command>): Effect.Effect<Command, never, Scope.Scope> =>
  Effect.uninterruptible(Effect.tap(command, (built) =>
    built.released === undefined ? Effect.void : Effect.addFinalizer(() => Effect.sync(() => built.released!({ exitCode: 0, signal: 9 })))))
