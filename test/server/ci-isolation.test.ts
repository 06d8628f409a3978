/**
 * CI sandboxes (issue 20, item 1), attacked the way the attacker did: mallory, with no access
 * to acme, runs her own workflow whose step walks /proc/{pid}/environ and /proc/{pid}/cwd while an acme/app
 * run holding a CI secret and a withheld file is going, two tenants at once on one server. Also: a step
 * reading /proc/1/environ, the server's data directory and secret key, and another run's workspace;
 * `setsid` daemons killed at the run's end and at a cancel (checked on the host); the network: on by
 * default but without the host's loopback (neither a port the test opens on 127.0.0.1 nor the server's
 * own), while the same kind of listener on the machine's non-loopback address answers; `network: false`
 * reaching neither; and a node without bubblewrap refusing to start runners unless told `--ci-unsafe-shared-runner`.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { greeter, hostAddress, type Listener } from "../support/hostNetwork.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

let server: GroveServer
let listeners: Array<Listener> = []
const tokens: Record<string, string> = {}
const as = (user: string) => api(server.url, tokens[user])
const nonce = randomBytes(6).toString("hex")
const DEPLOY_TOKEN = `deploy-${nonce}-token`
const KEYS = `keys-file-${nonce}-content`
const CANARY = `server-canary-${nonce}`
// Distinct sleep lengths mark the daemons, so the host can look for them by command line.
const DAEMON_END = 900_000 + Math.floor(Math.random() * 90_000)
const DAEMON_CANCEL = DAEMON_END + 1
const reverse = (text: string) => [...text].reverse().join("")

/** Host processes whose command line is exactly `sleep <seconds>` (not the scripts that mention it). */
const sleepers = (seconds: number): Array<number> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\0${seconds}\0`
    } catch {
      return false
    }
  }).map(Number)

const ACME: Record<string, string> = {
  ".oak/PERMISSIONS": "/secret/ @olga\n",
  "secret/keys.txt": `${KEYS}\n`,
  // Holds DEPLOY_TOKEN in its environment and the checkout as its working directory until cancelled.
  ".oak/workflows/hold.yml": [
    "on: [manual]",
    "jobs:",
    "  hold:",
    "    steps:",
    "      - run: |",
    "          test -s secret/keys.txt",
    "          echo \"acme-ready in $GROVE_WORKSPACE\"",
    "          sleep 600"
  ].join("\n"),
  ".oak/workflows/daemon.yml": [
    "on: [manual]",
    "jobs:",
    "  bg:",
    "    steps:",
    "      - run: |",
    `          setsid sleep ${DAEMON_END} </dev/null >/dev/null 2>&1 &`,
    "          echo daemon-started",
    "          sleep 6"
  ].join("\n"),
  ".oak/workflows/daemon-cancel.yml": [
    "on: [manual]",
    "jobs:",
    "  bg:",
    "    steps:",
    "      - run: |",
    `          setsid sleep ${DAEMON_CANCEL} </dev/null >/dev/null 2>&1 &`,
    "          echo daemon-started",
    "          sleep 600"
  ].join("\n")
}

/** Reports `REACHED <name>` (with what the listener said, if anything) or `UNREACHABLE <name>`. */
const REACH = `reach() { if timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; then echo "REACHED $1 $(timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3 && timeout 1 head -n1 <&3" 2>/dev/null)"; else echo "UNREACHABLE $1"; fi; }`

/** The machine's loopback (a listener and the server's port) and its non-loopback address, as steps see them. */
interface Targets {
  readonly port: number
  readonly loopback: Listener
  readonly outside: Listener
}
const reachAll = (targets: Targets) =>
  `reach server-loopback 127.0.0.1 ${targets.port}; reach loopback 127.0.0.1 ${targets.loopback.port}; reach outside ${targets.outside.host} ${targets.outside.port}`

/** mallory's step: everything the attacker tried, each read reported as LEAK or DENIED. */
const spy = (dataDir: string, targets: Targets) => [
  "on: [manual]",
  "env:",
  `  DATA_DIR: ${JSON.stringify(dataDir)}`,
  "  MINE: mallory-own-variable",
  "jobs:",
  "  spy:",
  "    steps:",
  "      - run: |",
  "          try() { if out=$(eval \"$2\" 2>/dev/null) && [ -n \"$out\" ]; then echo \"LEAK $1: $out\" | rev; echo \"LEAK $1: $out\"; else echo \"DENIED $1\"; fi; }",
  "          for i in 1 2 3; do",
  "            for p in /proc/[0-9]*; do",
  "              echo \"pid ${p#/proc/}: $(tr '\\0' ' ' 2>/dev/null < $p/environ | rev)\"",
  "              ls -la $p/cwd/ 2>/dev/null || true",
  "              cat $p/cwd/secret/keys.txt 2>/dev/null || true",
  "            done",
  "            sleep 0.3",
  "          done",
  "          echo \"init environ: $(tr '\\0' ' ' < /proc/1/environ)\"",
  "          try data-dir 'ls -A \"$DATA_DIR\"'",
  "          try secret-key 'cat \"$DATA_DIR/secret.key\"'",
  "          try workspace 'ls -A \"$TARGET\"'",
  "          try workspace-keys 'cat \"$TARGET/secret/keys.txt\"'",
  "          try find-keys 'find / -path /proc -prune -o -path /usr -prune -o -name keys.txt -print 2>/dev/null'",
  "          try work-root 'ls -A \"$(dirname \"$GROVE_WORKSPACE\")\" | grep -v \"^$(basename \"$GROVE_WORKSPACE\")$\"'",
  "          try server-tmp 'ls -A /tmp | grep -vx \"$(echo \"$GROVE_WORKSPACE\" | cut -d/ -f3)\"'",
  `          ${REACH}`,
  `          ${reachAll(targets)}`,
  "          echo spy-done",
  "  offline:",
  "    network: false",
  "    steps:",
  "      - run: |",
  `          ${REACH}`,
  `          ${reachAll(targets)}`
].join("\n")

const runOf = (owner: string, repo: string, id: number) => as(owner === "acme" ? "olga" : owner).get(`/${owner}/${repo}/ci/runs/${id}`).then((r) => r.body)
const completed = (owner: string, repo: string, id: number) =>
  waitFor(`run ${owner}/${repo}#${id}`, async () => {
    const run = await runOf(owner, repo, id)
    return run.status === "completed" ? run : undefined
  }, 90_000)
const start = async (user: string, repo: string, workflow: string) => {
  const reply = await as(user).post(`/${repo}/ci/runs`, { workflow, branch: "setup" })
  expect(reply.status, JSON.stringify(reply.body)).toBe(201)
  return reply.body.run_ids[0] as number
}
const logsOf = (run: any): string => run.jobs.flatMap((job: any) => job.steps).map((step: any) => step.logs ?? "").join("")
const jobLogs = (run: any, key: string): string => run.jobs.find((job: any) => job.key === key).steps.map((step: any) => step.logs ?? "").join("")

beforeAll(async () => {
  server = await startServer({ args: ["--ci-concurrency", "4"], env: { GROVE_TEST_CANARY: CANARY } })
  for (const user of ["olga", "mallory"]) tokens[user] = await server.createUser(user)
  expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as("olga").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
  expect((await as("olga").raw("PUT", "/acme/app/ci/secrets", { name: "DEPLOY_TOKEN", value: DEPLOY_TOKEN })).status).toBe(200)
  const acme = buildCommit({ branch: "setup", files: ACME })
  expect((await as("olga").post("/acme/app/push", pushBody({ branch: "setup", commits: [acme], description: "Setup" }))).body.success).toBe(true)
  expect((await as("mallory").post("/repos", { name: "spy" })).status).toBe(201)
  // Listeners the test opens: one on the host's loopback, one on its non-loopback address (pasta, which
  // gives steps their network, needs one, so a machine that runs sandboxed steps has it).
  const address = hostAddress()
  expect(address, "this machine has no non-loopback IPv4 address").toBeDefined()
  listeners = [await greeter("127.0.0.1", `loopback-${nonce}`), await greeter(address!, `outside-${nonce}`)]
  const targets = { port: Number(new URL(server.url).port), loopback: listeners[0]!, outside: listeners[1]! }
  const spyCommit = buildCommit({ branch: "setup", files: { ".oak/workflows/spy.yml": spy(server.dataDir, targets) } })
  expect((await as("mallory").post("/mallory/spy/push", pushBody({ branch: "setup", commits: [spyCommit], description: "Spy" }))).body.success).toBe(true)
  // She has no access to acme at all.
  expect((await as("mallory").get("/acme/app/ci/runs")).status).toBe(404)
}, 300_000)

afterAll(async () => {
  for (const listener of listeners) await listener.close()
  await server?.stop()
})

describe("two tenants at once", () => {
  it("mallory's step walking /proc and other workspaces during an acme run sees none of acme's secret, files, or the server's", async () => {
    const acmeRun = await start("olga", "acme/app", "hold")
    try {
      const ready = await waitFor("the acme run to hold its secret", async () => {
        const run = await runOf("acme", "app", acmeRun)
        const match = /acme-ready in (\S+)/.exec(logsOf(run))
        return match?.[1]
      })
      // The acme checkout exists on the host while she looks for it (she is told exactly where).
      expect(fs.existsSync(path.join(ready, "secret/keys.txt"))).toBe(true)
      expect((await as("mallory").raw("PUT", "/mallory/spy/ci/secrets", { name: "TARGET", value: ready })).status).toBe(200)
      const spyRun = await completed("mallory", "spy", await start("mallory", "mallory/spy", "spy"))
      expect((await runOf("acme", "app", acmeRun)).status).toBe("running")
      const logs = jobLogs(spyRun, "spy")
      // The walk ran (it saw its own sandbox's processes and its own variable), so the absence below means something.
      expect(logs).toContain("spy-done")
      expect(logs).toContain(reverse("MINE=mallory-own-variable"))
      expect(logs).toMatch(/pid 1: /)
      const key = fs.readFileSync(path.join(server.dataDir, "secret.key"), "utf8").trim()
      for (const secret of [DEPLOY_TOKEN, KEYS, key, CANARY, "GROVE_TEST_CANARY", "VITEST"]) {
        expect(logs).not.toContain(secret)
        expect(logs).not.toContain(reverse(secret))
      }
      for (const attack of ["data-dir", "secret-key", "workspace", "workspace-keys", "find-keys", "work-root", "server-tmp"]) {
        expect(logs).toContain(`DENIED ${attack}`)
      }
      expect(logs).not.toContain("LEAK")
      // Only the sandbox's own processes: bwrap as PID 1, the shell and what it started.
      const pids = [...new Set([...logs.matchAll(/^pid (\d+): /gm)].map((m) => Number(m[1])))]
      expect(Math.max(...pids)).toBeLessThan(100)
      // /proc/1 is the sandbox's bwrap: started with the step's environment alone, or, in a sandbox
      // started ahead of its step (ci/WarmSandboxes.ts), with a PATH and nothing of any run's.
      const init = /init environ: (.*)/.exec(logs)?.[1] ?? ""
      if (init.includes("GROVE_REPOSITORY=")) {
        expect(init).toContain("MINE=mallory-own-variable")
        expect(init).toContain("GROVE_REPOSITORY=mallory/spy")
      } else {
        expect(init.trim().split(" ").map((entry) => entry.split("=")[0]).sort()).toEqual(["LANG", "PATH", "PWD", "TERM"])
      }
      expect(init).not.toMatch(/GROVE_SECRET_KEY|GROVE_DATA_DIR|GROVE_TEST_CANARY|NODE_|npm_/)
      // Network: on by default, to the machine's own address (that listener answered) but not to anything
      // on its loopback, neither the test's listener nor the server's port; off where the job says so.
      expect(logs).toContain(`REACHED outside outside-${nonce}`)
      expect(logs).toContain("UNREACHABLE loopback")
      expect(logs).toContain("UNREACHABLE server-loopback")
      expect(logs).not.toContain(`loopback-${nonce}`)
      const offline = jobLogs(spyRun, "offline")
      for (const target of ["outside", "loopback", "server-loopback"]) expect(offline).toContain(`UNREACHABLE ${target}`)
    } finally {
      await as("olga").post(`/acme/app/ci/runs/${acmeRun}/cancel`)
    }
    expect((await completed("acme", "app", acmeRun)).conclusion).toBe("cancelled")
  }, 150_000)
})

describe("background processes end with their step", () => {
  it("kills a setsid daemon when the run ends", async () => {
    const id = await start("olga", "acme/app", "daemon")
    await waitFor("the daemon to run on the host", async () => (sleepers(DAEMON_END).length > 0 ? true : undefined), 30_000)
    const run = await completed("acme", "app", id)
    expect(run.conclusion).toBe("success")
    expect(logsOf(run)).toContain("daemon-started")
    await waitFor("no daemon left", async () => (sleepers(DAEMON_END).length === 0 ? true : undefined), 10_000)
  }, 90_000)

  it("kills a setsid daemon when the run is cancelled", async () => {
    const id = await start("olga", "acme/app", "daemon-cancel")
    await waitFor("the daemon to run on the host", async () => (sleepers(DAEMON_CANCEL).length > 0 ? true : undefined), 30_000)
    expect((await as("olga").post(`/acme/app/ci/runs/${id}/cancel`)).status).toBe(204)
    expect((await completed("acme", "app", id)).conclusion).toBe("cancelled")
    await waitFor("no daemon left", async () => (sleepers(DAEMON_CANCEL).length === 0 ? true : undefined), 10_000)
  }, 90_000)
})

describe("a node without bubblewrap", () => {
  // A PATH with the tools the runner uses but not bwrap: as on a host where bubblewrap is not installed.
  let bin: string
  beforeAll(() => {
    bin = fs.mkdtempSync(path.join(os.tmpdir(), "grove-nobwrap-"))
    for (const tool of ["id", "chown", "setpriv", "tar", "gzip", "sh", "bash"]) fs.symlinkSync(`/usr/bin/${tool}`, path.join(bin, tool))
  })
  afterAll(() => fs.rmSync(bin, { recursive: true, force: true }))

  const setup = async (node: GroveServer) => {
    const key = await node.createUser("lena")
    const lena = api(node.url, key)
    expect((await lena.post("/repos", { name: "lim" })).status).toBe(201)
    const c = buildCommit({ branch: "setup", files: { ".oak/workflows/hi.yml": "on: [manual]\njobs:\n  a:\n    steps:\n      - run: echo hi-from-$(id -u)\n" } })
    expect((await lena.post("/lena/lim/push", pushBody({ branch: "setup", commits: [c], description: "Hi" }))).body.success).toBe(true)
    const started = await lena.post("/lena/lim/ci/runs", { workflow: "hi", branch: "setup" })
    expect(started.status).toBe(201)
    return { key, id: started.body.run_ids[0] as number }
  }

  it("refuses to start CI runners and says why; the run waits queued until a node that may run it (here --ci-unsafe-shared-runner, with a warning)", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-nobwrap-data-"))
    let node = await startServer({ dataDir, env: { PATH: bin } })
    try {
      await waitFor("the refusal in the log", async () => (node.output().includes("CI runners NOT started") ? true : undefined), 30_000)
      expect(node.output()).toContain("bwrap (bubblewrap) is not on the PATH")
      expect(node.output()).toContain("--ci-unsafe-shared-runner")
      const { key, id } = await setup(node)
      expect((await api(node.url, key).get(`/lena/lim/ci/runs/${id}`)).body.status).toBe("queued")
      await node.stop()
      node = await startServer({ dataDir, args: ["--ci-unsafe-shared-runner"], env: { PATH: bin } })
      await waitFor("the warning in the log", async () => (node.output().includes("UNSAFE: CI steps run unsandboxed") ? true : undefined), 30_000)
      const lena = api(node.url, key)
      const run = await waitFor("the run", async () => {
        const body = (await lena.get(`/lena/lim/ci/runs/${id}`)).body
        return body.status === "completed" ? body : undefined
      })
      expect(run.conclusion).toBe("success")
      // Unsandboxed, as --ci-user on the host: the old behaviour, which the operator chose.
      expect(logsOf(run)).toContain("hi-from-65534")
    } finally {
      await node.stop()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }, 240_000)
})
