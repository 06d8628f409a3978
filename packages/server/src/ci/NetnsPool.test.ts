import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { greeter, hostAddress } from "../../../../test/support/hostNetwork.ts"
import { guarded, make, pooled } from "./NetnsPool.ts"
import { type Isolation, jobUser, probe, stepCommand } from "./Sandbox.ts"
import { stepEnvironment } from "./StepEnvironment.ts"

const settings = { runAsUser: "nobody", uidBase: 200_000, unsafeSharedRunner: false }
// The pool is for a server running as root (each job its own host uid).
const root = process.getuid?.() === 0

let scope: Scope.Closeable
let isolation: Isolation

/** Runs one step command as the runner would (without the terminal), then tells the command its exit as StepProcess does. */
const run = (network: boolean, script: string, env: Record<string, string> = { PATH: "/usr/bin:/bin" }, files: Record<string, string> = {}) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const user = yield* jobUser(isolation)
    const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "grove-netns-test-"))
    for (const [name, from] of Object.entries({ ".": workspace, ...files })) {
      if (name !== ".") fs.copyFileSync(from, path.join(workspace, name))
      fs.chownSync(path.join(workspace, name), user!.uid, user!.gid)
    }
    const command = yield* stepCommand(isolation, user, workspace, network, script, env)
    const stdout = yield* Effect.promise(() =>
      new Promise<string>((resolve) => {
        const child = spawn(command.file, [...command.args], { cwd: workspace, env: stepEnvironment(env), stdio: ["ignore", "pipe", "ignore"] })
        let out = ""
        child.stdout.on("data", (chunk) => (out += String(chunk)))
        child.on("close", (code, signal) => {
          command.released?.({ exitCode: code ?? 0, signal: signal === null ? 0 : os.constants.signals[signal] })
          fs.rmSync(workspace, { recursive: true, force: true })
          resolve(command.exitMarker === undefined ? out : out.slice(0, out.indexOf(command.exitMarker)))
        })
      })
    )
    return { stdout, pooled: command.released !== undefined, file: command.file }
  })))

const pool = () => {
  if (isolation._tag !== "Sandboxed" || isolation.netns === undefined) throw new Error("no pool")
  return isolation.netns.pool
}

/** Until the pool has a namespace made and free (a take that finds none starts one). */
const aFreeNamespace = async () => {
  for (let i = 0; i < 200; i++) {
    const lease = pool().take()
    if (lease !== undefined) return lease.done({ exitCode: 0, signal: 0 })
    await new Promise((done) => setTimeout(done, 50))
  }
  throw new Error("no namespace was made")
}

const netnsOf = "readlink /proc/self/ns/net"

describe.runIf(root)("NetnsPool", () => {
  beforeAll(async () => {
    scope = await Effect.runPromise(Scope.make())
    const found = await Effect.runPromise(probe(settings))
    if (found._tag !== "Ready") throw new Error(`no sandbox on this machine: ${found.reason}`)
    // One namespace at most: every pooled step below runs in the same one unless it was retired.
    isolation = (await Effect.runPromise(Scope.provide(scope)(pooled(found.isolation, 1))))!
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("a pooled step reaches the host's address but not its loopback, and cannot reconfigure the namespace", async () => {
    await aFreeNamespace()
    const greeting = `hello-${process.pid}-${Date.now()}`
    const listeners = [await greeter(hostAddress()!, greeting), await greeter("127.0.0.1", greeting)]
    try {
      const reach = listeners.map(({ host, port }) =>
        `echo "${host} $(timeout 3 bash -c 'exec 3<>/dev/tcp/${host}/${port} && head -n1 <&3' 2>/dev/null || echo unreachable)"`
      ).join("; ")
      const { stdout, pooled, file } = await run(true, `${reach}; ip link set lo down 2>/dev/null && echo changed || echo refused`)
      expect(pooled).toBe(true)
      expect(file).toMatch(/nsenter$/)
      expect(stdout.trim().split("\n")).toEqual([`${hostAddress()} ${greeting}`, "127.0.0.1 unreachable", "refused"])
    } finally {
      for (const listener of listeners) await listener.close()
    }
  })

  it("the next step in the same namespace meets nothing of the last one: not its listener, not its files", async () => {
    await aFreeNamespace()
    // A daemon of its own session listening on the namespace's loopback, and a file in /tmp: both gone with the step.
    // It says so once it listens (then the step waits for that): no guess of how long python takes to start.
    const first = await run(true, `${netnsOf}; setsid python3 -c 'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 47123)); s.listen(); open("/tmp/listening", "w").close(); time.sleep(30)' & until test -e /tmp/listening; do sleep 0.02; done; echo left > /tmp/left-behind; cat /proc/net/tcp | wc -l`)
    const second = await run(true, `${netnsOf}; timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/47123' 2>/dev/null && echo connected || echo refused; test -e /tmp/left-behind && echo file || echo no-file; cat /proc/net/tcp | wc -l`)
    expect(first.pooled && second.pooled).toBe(true)
    const [namespace, listening] = first.stdout.trim().split("\n")
    expect(listening).toBe("2")
    // The same namespace, clean.
    expect(second.stdout.trim().split("\n")).toEqual([namespace, "refused", "no-file", "1"])
  })

  it("a step that leaves a socket in the namespace (TIME_WAIT) retires it: the next step gets a new one", async () => {
    await aFreeNamespace()
    // The listening side closes first: its end waits in TIME_WAIT in the namespace for a minute.
    const first = await run(true, `${netnsOf}; python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); c = socket.create_connection(s.getsockname()); a, _ = s.accept(); a.close(); c.recv(1); c.close()'; tail -n +2 /proc/net/tcp | wc -l`)
    await aFreeNamespace()
    const second = await run(true, `${netnsOf}; cat /proc/net/tcp | wc -l`)
    expect(first.pooled && second.pooled).toBe(true)
    const [namespace, waiting] = first.stdout.trim().split("\n")
    expect(Number(waiting)).toBeGreaterThan(0)
    const [next, lines] = second.stdout.trim().split("\n")
    expect(next).not.toBe(namespace)
    expect(lines).toBe("1")
  })

  it("a step that sent anything retires its namespace: the next one learns nothing of where it connected", async () => {
    await aFreeNamespace()
    // The greeter closes first and the step reads to its end (`cat`, not `head -n1`, which may close before the
    // greeter's FIN is in and so leave the step's side in TIME_WAIT): no socket is left once the greeter's last ACK is
    // in (waited for, at most 3 s); the kernel keeps the peer's metrics (address, RTT) in the namespace all the same.
    const listener = await greeter(hostAddress()!, "greeting")
    try {
      const first = await run(true, `${netnsOf}; for i in 1 2 3; do timeout 3 bash -c 'exec 3<>/dev/tcp/${listener.host}/${listener.port} && cat <&3'; done; for i in $(seq 150); do test "$(tail -n +2 /proc/net/tcp | wc -l)" = 0 && break; sleep 0.02; done; tail -n +2 /proc/net/tcp | wc -l`)
      const [namespace, ...rest] = first.stdout.trim().split("\n")
      expect(rest).toEqual(["greeting", "greeting", "greeting", "0"])
      await aFreeNamespace()
      const second = await run(true, `${netnsOf}; ip tcp_metrics show 2>&1; awk '/^Tcp: [0-9]/ { print "opens", $6 }' /proc/net/snmp`)
      const [next, ...seen] = second.stdout.trim().split("\n")
      expect(next).not.toBe(namespace)
      expect(seen).toEqual(["opens 0"])
      // One that sent nothing leaves it to the next.
      const third = await run(true, netnsOf)
      expect(third.stdout.trim()).toBe(next)
    } finally {
      await listener.close()
    }
  })

  it("what was sent in a free namespace, between two steps, retires it at the next step's check", async () => {
    await aFreeNamespace()
    const [namespace] = (await run(true, netnsOf)).stdout.trim().split("\n")
    // Kept free, the pool's own descriptor of it: a datagram sent there as root, no step running.
    const fd = fs.readdirSync("/proc/self/fd").find((entry) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${entry}`) === namespace
      } catch {
        return false
      }
    })
    expect(fd).toBeDefined()
    execFileSync("nsenter", [`--net=/proc/${process.pid}/fd/${fd}`, "--", "bash", "-c", "echo x > /dev/udp/10.0.2.2/9"])
    // The next step runs there (the only one free), sends nothing itself, and the namespace is not given to a third.
    const second = await run(true, netnsOf)
    expect(second.stdout.trim()).toBe(namespace)
    await aFreeNamespace()
    expect((await run(true, netnsOf)).stdout.trim()).not.toBe(namespace)
  })

  it("a workflow's LD_PRELOAD of a committed library loads in no process outside the sandbox (root ones first)", async () => {
    await aFreeNamespace()
    // The library writes its uid under `seen` when it loads: the sandbox has its own /tmp, so only a process
    // outside it can write there.
    const seen = fs.mkdtempSync(path.join(os.tmpdir(), "grove-preload-seen-"))
    fs.chmodSync(seen, 0o777)
    const source = path.join(seen, "x.c")
    fs.writeFileSync(source, `#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void init(void) { char name[256]; snprintf(name, sizeof name, "${seen}/%d", (int)getpid()); FILE *f = fopen(name, "w"); if (f) { fprintf(f, "%d", (int)getuid()); fclose(f); } }\n`)
    execFileSync("cc", ["-shared", "-fPIC", "-o", path.join(seen, "x.so"), source])
    try {
      const env = { PATH: "/usr/bin:/bin", LD_PRELOAD: "./x.so", STEP_ONLY: "yes" }
      const pooledRun = await run(true, 'echo "$LD_PRELOAD $STEP_ONLY ${GROVE_STEP_ENV_STEP_ONLY:-unset}"', env, { "x.so": path.join(seen, "x.so") })
      const offline = await run(false, 'echo "$LD_PRELOAD $STEP_ONLY"', env, { "x.so": path.join(seen, "x.so") })
      expect(pooledRun.file).toMatch(/nsenter$/)
      // The step has its variables, and only them.
      expect(pooledRun.stdout.trim()).toBe("./x.so yes unset")
      expect(offline.stdout.trim()).toBe("./x.so yes")
      expect(fs.readdirSync(seen).filter((name) => /^\d+$/.test(name)).map((name) => fs.readFileSync(path.join(seen, name), "utf8"))).toEqual([])
    } finally {
      fs.rmSync(seen, { recursive: true, force: true })
    }
  })

  it("a killed step's namespace is retired", async () => {
    await aFreeNamespace()
    const user = await Effect.runPromise(Effect.scoped(jobUser(isolation)))
    const command = await Effect.runPromise(stepCommand(isolation, user, "/", true, "true", {}))
    expect(command.released).toBeDefined()
    const size = pool().size()
    command.released!({ exitCode: 0, signal: 9 })
    expect(pool().size()).toBe(size - 1)
  })

  it("a step cancelled before its process started gives its namespace back when its scope closes (retired); one that ran does not twice", async () => {
    await aFreeNamespace()
    const size = pool().size()
    // Taken, never started: retired at the scope's end.
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const user = yield* jobUser(isolation)
      const command = yield* guarded(stepCommand(isolation, user, "/", true, "true", {}))
      expect(command.released).toBeDefined()
    })))
    expect(pool().size()).toBe(size - 1)
    await aFreeNamespace()
    // Given back by its exit: kept, and the scope's end changes nothing.
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const user = yield* jobUser(isolation)
      const command = yield* guarded(stepCommand(isolation, user, "/", true, "true", {}))
      command.released!({ exitCode: 0, signal: 0 })
    })))
    expect(pool().size()).toBe(1)
    const lease = pool().take()
    expect(lease).toBeDefined()
    lease!.done({ exitCode: 0, signal: 0 })
  })

  it("retires free namespaces unused for a while, all but one", async () => {
    if (isolation._tag !== "Sandboxed") throw new Error("not sandboxed")
    const tools = { pasta: isolation.pasta, setpriv: isolation.setpriv!, uidBase: isolation.uidBase }
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const small = yield* make(tools, 3, 400)
      // Three made (each take that leaves none free makes another), then all given back.
      const leases = []
      // At most 25 s: each pasta start can take seconds on a busy machine.
      for (let i = 0; i < 500 && small.size() < 3; i++) {
        const lease = small.take()
        if (lease !== undefined) leases.push(lease)
        yield* Effect.sleep(50)
      }
      expect(small.size()).toBe(3)
      for (const lease of leases) lease.done({ exitCode: 0, signal: 0 })
      // The sweep runs on a timer: wait for its outcome (at most 25 s) rather than a fixed time, then a further
      // idle period in which the last one must stay.
      for (let i = 0; i < 500 && small.size() > 1; i++) yield* Effect.sleep(50)
      expect(small.size()).toBe(1)
      yield* Effect.sleep(1000)
      expect(small.size()).toBe(1)
    })))
  })

  it("network: false has no network, pool or not", async () => {
    await aFreeNamespace()
    const { stdout, pooled } = await run(false, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
    expect(pooled).toBe(false)
    expect(stdout.trim()).toBe("lo")
  })
})
