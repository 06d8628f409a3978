/**
 * A rolling restart of a two-node cluster under a steady load of pushes and merges (issue 26, Lifecycle):
 * node A is SIGTERMed, started again and waited ready, then node B the same. A small load balancer in
 * the test sends each request to a node whose `/readyz` answers 200 (round-robin) and retries a request
 * once on the other node when it failed with a connection error or a 503 (see `send`).
 *
 * Asserted: no request failed without a successful retry; every acknowledged push and merge is in the
 * final state, read back through both nodes; both nodes exit 0 on SIGTERM. Printed: how long the
 * surviving node took to serve all 32 partitions after the other's SIGTERM (it left the group, so no
 * session timeout is waited for), and the p99 latency during the roll against the p99 before it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "../../scripts/infra/process.ts"
import { type ClusterInfra, createClusterUser, startClusterInfra } from "../support/ClusterInfra.ts"
import { buildCommit, type Built, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, type Reply, settleReply } from "../support/http.ts"
import { repoPerPartition } from "../support/PartitionLoad.ts"
import { waitFor } from "../support/waitFor.ts"

const OWNER = "rolly"
const CLIENTS = 4
/** The listener stays open this long after SIGTERM, with /readyz at 503: longer than the balancer's probe interval. */
const SHUTDOWN_DELAY_MS = 1000
const PROBE_EVERY_MS = 200
/**
 * The drain deadline, generous for a loaded machine: the work in hand finishes far sooner, so a worker
 * still running at the deadline (one that never noticed the stop) is a fault, logged by the node.
 */
const DRAIN_TIMEOUT_MS = 20_000
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Slot {
  readonly name: string
  readonly port: number
  server: GroveServer
  /** The exit codes of this slot's processes that were signalled. */
  readonly exits: Array<number | null>
}

let infra: ClusterInfra | undefined
const slots: Array<Slot> = []
let key = ""
/** The suite's broker's log (its group coordinator logs every join, explicit leave and rebalance). */
let brokerLog = ""

const startNode = (name: string, port: number) =>
  startServer({
    env: infra!.env,
    args: [
      "--node-id", name, "--port", String(port),
      "--shutdown-delay-ms", String(SHUTDOWN_DELAY_MS), "--drain-timeout-ms", String(DRAIN_TIMEOUT_MS)
    ]
  })

beforeAll(async () => {
  infra = await startClusterInfra()
  key = await createClusterUser(infra, OWNER, { admin: true })
  const port = infra.kafkaBootstrap.split(":").pop()!
  for (const dir of fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith("grove-kafka-"))) {
    const properties = path.join(os.tmpdir(), dir, "server.properties")
    if (fs.existsSync(properties) && fs.readFileSync(properties, "utf8").includes(`PLAINTEXT://127.0.0.1:${port},`)) {
      brokerLog = path.join(os.tmpdir(), dir, "broker.log")
    }
  }
  if (brokerLog === "") throw new Error(`no broker log found for ${infra.kafkaBootstrap}`)
  for (const name of ["roll-a", "roll-b"]) {
    const port = await Effect.runPromise(freePort())
    slots.push({ name, port, server: await startNode(name, port), exits: [] })
  }
}, 300_000)

afterAll(async () => {
  for (const slot of slots) {
    // The nodes' logs stay in the temp dir for a look after a failure.
    fs.writeFileSync(path.join(os.tmpdir(), `grove-rolling-restart-${slot.name}.log`), slot.server.output())
    await slot.server.stop()
  }
  // The broker's log too (why each rebalance began), before its data dir goes.
  if (brokerLog !== "" && fs.existsSync(brokerLog)) fs.copyFileSync(brokerLog, path.join(os.tmpdir(), "grove-rolling-restart-broker.log"))
  await infra?.close()
}, 300_000)

/** Which nodes answer /readyz 200, asked every PROBE_EVERY_MS, as a load balancer's health check does. */
const readiness = () => {
  const ready = new Set<string>()
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      await Promise.all(slots.map(async (slot) => {
        const status = await fetch(`${slot.server.url}/readyz`, { signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0)
        if (status === 200) ready.add(slot.server.url)
        else ready.delete(slot.server.url)
      }))
      await sleep(PROBE_EVERY_MS)
    }
  })()
  return { ready, stop: () => ((stopped = true), loop) }
}

interface Sample {
  readonly op: "push" | "merge"
  readonly startedAt: number
  readonly ms: number
  readonly retried: boolean
  /** Answered 202 and followed to its outcome. */
  readonly pending: boolean
}

interface Failure {
  readonly op: string
  readonly what: string
}

/**
 * The balancer: round-robin over the ready nodes (all of them if none is ready), and one retry on the other
 * node after a connection error (refused, reset, closed before the answer) or a 503. A client may retry only
 * what is safe to run twice: a push is idempotent by the sync protocol (the same commits onto the same
 * expected head land once; a second send finds them there), and a merge carries an Idempotency-Key (a repeat
 * replays the first answer; the merge itself is planned against main's and the branch's expected heads).
 * A 202 (the command outlived the request's wait) is not retried either: like `grove`, the client follows its
 * operation to the outcome (see `settle`), and only that outcome counts.
 */
const balancer = (ready: ReadonlySet<string>) => {
  let turn = 0
  const urls = () => slots.map((slot) => slot.server.url)
  return async (attempt: (url: string) => Promise<Reply>): Promise<{ reply?: Reply; error?: string; retried: boolean }> => {
    const live = urls().filter((url) => ready.has(url))
    const first = (live.length > 0 ? live : urls())[turn++ % (live.length > 0 ? live.length : urls().length)]!
    const once = (url: string): Promise<{ reply?: Reply; error?: string }> =>
      attempt(url).then((reply) => ({ reply }), (error: unknown) => ({ error: whyFailed(error) }))
    const answer = await once(first)
    if (answer.reply !== undefined && answer.reply.status !== 503) return { ...answer, retried: false }
    const other = urls().find((url) => url !== first) ?? first
    return { ...(await once(other)), retried: true }
  }
}

/** A fetch failure with its cause (ECONNREFUSED, UND_ERR_SOCKET, ...). */
const whyFailed = (error: unknown): string => {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause
  return `${String(error)}${cause === undefined ? "" : ` (${cause.code ?? cause.message})`}`
}

interface Acked {
  readonly repo: string
  readonly branch: string
  readonly tip: string
  /** The squash commit on main, once the merge was acknowledged. */
  merged?: string
}

/** One client: pushes a branch off main in its own repository, merges it, over and over until stopped. */
const client = (
  repo: string,
  send: ReturnType<typeof balancer>,
  out: { samples: Array<Sample>; failures: Array<Failure>; acked: Array<Acked> },
  running: () => boolean
) =>
  (async () => {
    let head: string | null = null
    let files: Record<string, string> = {}
    let main: Built | undefined
    for (let round = 0; running(); round++) {
      const branch = `r${round}`
      const own = { ...files, [`${branch}.txt`]: `${repo} round ${round}\n` }
      const commit = buildCommit({ branch, files: own, parentHash: head, parentSnapshot: main?.snapshot ?? new Map(), author: repo })
      const body = pushBody({ branch, commits: [commit] })
      const timed = async (op: "push" | "merge", attempt: (url: string) => Promise<Reply>) => {
        const startedAt = Date.now()
        const result = await send((url) => attempt(url))
        const pending = result.reply?.status === 202
        const reply = result.reply === undefined ? undefined : await settleReply(result.reply, () => slots.map((slot) => slot.server.url), key)
        out.samples.push({ op, startedAt, ms: Date.now() - startedAt, retried: result.retried, pending })
        return { ...result, reply }
      }
      const pushed = await timed("push", (url) => api(url, key).post(`/${OWNER}/${repo}/push`, body))
      if (pushed.reply?.status !== 200 || pushed.reply.body.success !== true) {
        out.failures.push({ op: `push ${repo}:${branch}`, what: pushed.error ?? `${pushed.reply?.status} ${JSON.stringify(pushed.reply?.body)}` })
        break
      }
      const acked: Acked = { repo, branch, tip: commit.commit.hash }
      out.acked.push(acked)
      const merged = await timed("merge", (url) =>
        api(url, key).post(`/${OWNER}/${repo}/branches/${branch}/merge`, {}, { "idempotency-key": `${repo}-${branch}` }))
      if (merged.reply?.status !== 200) {
        out.failures.push({ op: `merge ${repo}:${branch}`, what: merged.error ?? `${merged.reply?.status} ${JSON.stringify(merged.reply?.body)}` })
        break
      }
      acked.merged = merged.reply.body.commit_hash as string
      // Nothing else writes this repository: main is now the branch's tree, under the squash commit.
      head = acked.merged
      files = own
      main = commit
      await sleep(50)
    }
  })()

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!
}

/** The broker's log from `from` (a length read earlier) on. */
const brokerLogSince = (from: number) => fs.readFileSync(brokerLog, "utf8").slice(from)

/** The consumer-group members `node` joined with, as the broker logged them. */
const membersOf = (log: string, node: string) =>
  new Set([...log.matchAll(new RegExp(`Adding new member (${node}-[\\w-]+) `, "g"))].map((m) => m[1]!))

/** The members that left their group by an explicit LeaveGroup (not by a session timeout). */
const leftExplicitly = (log: string) =>
  new Set([...log.matchAll(/Member ([\w-]+) has left group through explicit `LeaveGroup`/g)].map((m) => m[1]!))

/**
 * A node's log lines about the partitions its drain cut at the deadline: the deadline's line (naming the
 * group, topic and partitions) and every line naming one of those partitions of that topic. None if it cut none.
 */
const drainCuts = (output: string): Array<string> => {
  const lines = output.split("\n")
  const cuts = lines.filter((line) => line.includes("the drain deadline passed"))
  const about = cuts.flatMap((line) => {
    const topic = /"topic":"([^"]+)"/.exec(line)?.[1] ?? "grove.commands"
    const partitions = (/"partitions":"([\d,]*)"/.exec(line)?.[1] ?? "").split(",").filter((p) => p !== "")
    // A worker's lines carry its topic and partition as annotations, the group's lines (assignment, draining) a
    // list of partitions; others name `topic/partition` in the text.
    return partitions.map((p) => (other: string) =>
      (other.includes(`"topic":"${topic}"`) && new RegExp(`"partition":${p}(?!\\d)|"partitions":"(\\d+,)*${p}[,"]`).test(other)) ||
      new RegExp(`${topic.replaceAll(".", "\\.")}/${p}(?!\\d)`).test(other)
    )
  })
  return lines.filter((line) => line.includes("the drain deadline passed") || about.some((names) => names(line)))
}

/** How many partitions a node serves, from its /api/health (0 while it cannot answer). */
const served = (url: string) =>
  api(url).get("/health").then((r) => r.status === 200 ? (r.body.partitions as Array<number>).length : 0, () => 0)

describe("rolling restart of two nodes under load (cluster)", () => {
  it("no request fails without a successful retry, nothing acknowledged is lost, both nodes exit 0", async () => {
    const repos = repoPerPartition(OWNER, 32).filter((_, i) => i % 8 === 3).slice(0, CLIENTS)
    for (const repo of repos) {
      const created = await api(slots[0]!.server.url, key).post("/repos", { name: repo })
      expect(created.status, JSON.stringify(created.body)).toBe(201)
    }
    const health = readiness()
    await waitFor("both nodes ready", async () => health.ready.size === 2 ? true : undefined, 120_000)
    const send = balancer(health.ready)
    const out = { samples: [] as Array<Sample>, failures: [] as Array<Failure>, acked: [] as Array<Acked> }
    let running = true
    const clients = repos.map((repo) => client(repo, send, out, () => running))

    // The steady state before the roll: enough requests for a p99 (a loaded machine serves fewer per second).
    await waitFor("80 requests before the roll", async () => out.samples.length >= 80 ? true : undefined, 60_000).catch(() => undefined)
    const rollStart = Date.now()
    const takeovers: Array<string> = []
    for (const [i, slot] of slots.entries()) {
      const survivor = slots[1 - i]!
      const exited = new Promise<{ code: number | null; at: number }>((resolve) =>
        slot.server.process.once("exit", (code) => resolve({ code, at: Date.now() })))
      // Every member this process joined with: all joined before now (a restarted node's come later).
      const members = membersOf(brokerLogSince(0), slot.name)
      for (const left of leftExplicitly(brokerLogSince(0))) members.delete(left)
      expect(members.size, `${slot.name}'s group members`).toBeGreaterThan(0)
      const signalled = Date.now()
      slot.server.process.kill("SIGTERM")
      // The survivor serves every partition once the stopping node has left the group.
      await waitFor(`${survivor.name} serving all 32 partitions`, async () => (await served(survivor.server.url)) === 32 ? true : undefined, 60_000)
      const tookOver = Date.now() - signalled
      const { code, at } = await exited
      const stoppedIn = at - signalled
      slot.exits.push(code)
      // The stopped node's log goes to the temp dir before anything is asserted on it (a CI failure is diagnosable).
      const stoppedLog = path.join(os.tmpdir(), `grove-rolling-restart-${slot.name}-1.log`)
      fs.writeFileSync(stoppedLog, slot.server.output())
      takeovers.push(`${survivor.name} served all 32 partitions ${tookOver} ms after ${slot.name}'s SIGTERM (${slot.name} exited ${code} after ${stoppedIn} ms)`)
      console.log(takeovers.at(-1))
      // It left every group it was in (grove.entities, the webhook and CI groups, its replies and tail readers).
      const stayed = () => [...members].filter((member) => !leftExplicitly(brokerLogSince(0)).has(member))
      await waitFor("the broker to log the leaves", async () => stayed().length === 0 ? true : undefined, 10_000).catch(() => undefined)
      expect(stayed(), `${slot.name}'s members that did not leave their group`).toEqual([])
      // Every worker ended by itself once its intake closed (its record in hand done): none was cut at the deadline.
      // On failure: the node's lines about the partitions it cut.
      expect(drainCuts(slot.server.output()), `${slot.name} cut workers at the drain deadline (whole log: ${stoppedLog})`).toEqual([])
      slot.server = await startNode(slot.name, slot.port)
      await waitFor(`${slot.name} ready again`, async () => health.ready.has(slot.server.url) && health.ready.size === 2 ? true : undefined, 120_000)
    }
    const rollEnd = Date.now()
    await sleep(3000)
    running = false
    await Promise.all(clients)
    await health.stop()

    const before = out.samples.filter((s) => s.startedAt < rollStart).map((s) => s.ms)
    const during = out.samples.filter((s) => s.startedAt >= rollStart && s.startedAt < rollEnd).map((s) => s.ms)
    console.log(
      `rolling restart (load ${os.loadavg()[0]!.toFixed(1)}): ${takeovers.join("; ")}; ` +
        `${out.samples.length} requests (${out.samples.filter((s) => s.retried).length} retried once, ${out.samples.filter((s) => s.pending).length} answered 202 and followed), ` +
        `${out.acked.length} pushes and ${out.acked.filter((a) => a.merged !== undefined).length} merges acknowledged; ` +
        `p99 before the roll ${percentile(before, 0.99)} ms (${before.length} requests, p50 ${percentile(before, 0.5)} ms), ` +
        `during it ${percentile(during, 0.99)} ms (${during.length} requests, p50 ${percentile(during, 0.5)} ms, ` +
        `ratio ${(percentile(during, 0.99) / percentile(before, 0.99)).toFixed(2)}), roll ${rollEnd - rollStart} ms`
    )
    expect(out.failures, JSON.stringify(out.failures)).toEqual([])
    expect(slots.flatMap((slot) => slot.exits)).toEqual([0, 0])
    expect(during.length).toBeGreaterThan(0)

    // Every acknowledged push and merge, read back through both nodes.
    for (const slot of slots) {
      const reader = api(slot.server.url, key)
      for (const repo of repos) {
        const chain = (await reader.get(`/${OWNER}/${repo}/pull`)).body.commits as Array<{ hash: string }>
        const onMain = new Set(chain.map((c) => c.hash))
        const mine = out.acked.filter((a) => a.repo === repo)
        for (const acked of mine.filter((a) => a.merged !== undefined)) expect(onMain.has(acked.merged!), `${repo}: merge of ${acked.branch}`).toBe(true)
        for (const acked of mine) {
          const history = (await reader.get(`/${OWNER}/${repo}/pull?branch_name=${acked.branch}`)).body.commits as Array<{ hash: string }>
          expect(history.map((c) => c.hash), `${slot.name}: push to ${repo}:${acked.branch}`).toContain(acked.tip)
        }
      }
    }
  }, 600_000)
})
