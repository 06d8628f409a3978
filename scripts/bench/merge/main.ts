/**
 * Benchmark: squash merges through the Repository entity.
 *
 *   npm run bench:merge [-- --merges 200 --per-repo 40 --tree-files 1,1000 --skip-kafka --skip-many --nodes 2]
 *   [--bin <other checkout>/packages/server/bin/grove-server.js]   (another checkout's server, for A/B in one sitting)
 *
 * Embedded: merges of prepared branches one after another on one repository (serialized by the
 * entity), once per tree size (`--tree-files`: the files main holds before the merges), and 16
 * repositories merged at once (one client per repository). Baseline in the same run: a minimal
 * entity command (PATCH visibility) on the same server, one after another. Each serialized row (the
 * baseline and each tree's merges) is timed after `WARM_UP` untimed commands of its own kind.
 * Kafka: the many-repository run (16, or 8 per node if more) against one node, then against
 * `--nodes` N nodes (default 2; clients split between them); the ratio N/one is the scale-out (target
 * >= 0.8 N). Per node: CPU time per merge, and the CPU of Kafka, PostgreSQL and MinIO (from /proc).
 * Branches are pushed before timing starts; each adds its own file to a main made from a first
 * merge, so every merge is clean.
 */
import { buildCommit, type Built, inlineBlobs, pushBody } from "../../../test/support/content.ts"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as TreeMerge from "@grove/core/merge/TreeMerge"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Commit from "@grove/core/objects/Commit"
import * as Timestamp from "@grove/core/objects/Timestamp"
import * as os from "node:os"
import { createClusterUser, startClusterInfra } from "../../../test/support/ClusterInfra.ts"
import { type GroveServer, startServer } from "../../../test/support/GroveServer.ts"
import { api, type Reply } from "../../../test/support/http.ts"
import { numberArg } from "../load.ts"
import { costReport, cpuDuring } from "../table/cpu.ts"
import { type Measure, percentile } from "../table/measure.ts"

const MERGES = numberArg("merges", 200)
const PER_REPO = numberArg("per-repo", 40)
const NODES = numberArg("nodes", 2)
const REPOS = Math.max(16, 8 * NODES)
const TREE_FILES = (process.argv[process.argv.indexOf("--tree-files") + 1] ?? "").split(",").map(Number).filter((n) => n > 0)
const skipKafka = process.argv.includes("--skip-kafka")
const skipMany = process.argv.includes("--skip-many")
const BIN = process.argv.includes("--bin") ? process.argv[process.argv.indexOf("--bin") + 1] : undefined

export interface Stats {
  readonly count: number
  readonly seconds: number
  readonly perSecond: number
  readonly p50: number
  readonly p99: number
  /** Each operation's latency in ms: the rows' spread. */
  readonly latencies: ReadonlyArray<number>
  /** The server's CPU time (its process tree) per operation, in µs: less noisy than rates on a loaded machine. */
  readonly cpuUs?: number | undefined
}

const stats = (latencies: Array<number>, seconds: number): Stats =>
  ({ count: latencies.length, seconds, perSecond: latencies.length / seconds, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), latencies })

/** `timed` under the server's CPU clock: its stats with the CPU per operation. */
const withCpu = async (server: GroveServer, timed: () => Promise<Stats>): Promise<Stats> => {
  const { result, cpu } = await cpuDuring([server.process.pid!], timed)
  return { ...result, cpuUs: (cpu.nodes[0]!.cpuMs * 1000) / Math.max(1, result.count) }
}

/** The files main holds before the merges: a README and `treeFiles - 1` small files, 50 to a directory. */
const baseFiles = (repo: string, treeFiles: number) => {
  const files: Record<string, string> = { "README.md": `# ${repo}\n` }
  for (let i = 1; i < treeFiles; i++) files[`tree/d${Math.floor(i / 50)}/f${i}.txt`] = `base file ${i}\n`
  return files
}

/** A repository whose main holds `treeFiles` files, and `count` branches that each add their own file. */
export const prepare = async (url: string, token: string, owner: string, repo: string, count: number, treeFiles = 1) => {
  const a = api(url, token)
  const created = await a.post("/repos", { name: repo })
  if (created.status !== 201 && created.status !== 202) throw new Error(`create ${repo}: ${JSON.stringify(created.body)}`)
  for (let i = 0; i < 100 && (await a.get(`/${owner}/${repo}`)).status !== 200; i++) await new Promise((r) => setTimeout(r, 100))
  const files = baseFiles(repo, treeFiles)
  const base = buildCommit({ branch: "base", files })
  await push(a, owner, repo, "base", [base])
  const merged = await finalAnswer(a, await a.post(`/${owner}/${repo}/branches/base/merge`))
  if (merged.status !== 200) throw new Error(`base merge: ${JSON.stringify(merged.body)}`)
  // Only main's head: its trees are `base`'s (reading them back through commits/info fails at 100,000 files).
  const mainHead = (await a.get(`/${owner}/${repo}/branches/main`)).body.head as string
  const known = new Set(base.trees.map((t) => t.hash))
  const branches: Array<string> = []
  for (let i = 0; i < count; i++) {
    const branch = `b${i}`
    const added = `file ${i} of ${repo}\n`
    const c = addFile(branch, mainHead, base, `files/${i}.txt`, added)
    // Only what main lacks: the new file's blob and the trees on its path.
    await push(a, owner, repo, branch, [c], { blobs: inlineBlobs(c), trees: c.trees.filter((t) => !known.has(t.hash)) })
    branches.push(branch)
  }
  return branches
}

/**
 * A write's final answer: one that outlived the server's command deadline (a 20,000-file push on a loaded
 * machine takes longer than the default 10 s) answers 202 with an operation to poll, not a failure.
 */
const finalAnswer = async (a: ReturnType<typeof api>, reply: Reply): Promise<Reply> => {
  if (reply.status !== 202 || typeof reply.body?.operation_id !== "string") return reply
  for (;;) {
    const op = await a.get(`/operations/${encodeURIComponent(reply.body.operation_id)}`)
    if (op.status === 200 && op.body.status === "done") return { status: op.body.http_status, body: op.body.response, headers: op.headers }
    if (op.status !== 200) throw new Error(`operation ${reply.body.operation_id}: ${op.status} ${JSON.stringify(op.body)}`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

/**
 * A commit after `parent` (whose tree is `base`'s) that adds one file: only the directories on its path are
 * built. A whole `buildCommit` of a 20,000-file tree per branch blocks this process for seconds each.
 */
const addFile = (branch: string, parent: string, base: Built, path: string, content: string): Built => {
  const bytes = new TextEncoder().encode(content)
  const file = { hash: Blake3.hash(bytes), mode: "regular" as const }
  const trees = new Map(base.trees.map((t) => [t.hash, t.entries]))
  const edited = TreeMerge.editTree(base.commit.manifest_hash, new Map([[path, file]]), (h) => trees.get(h))
  if (!edited.ok) throw new Error(edited.reason)
  const fields = { branch_name: branch, parent_hash: parent, manifest_hash: edited.root, author: "tester", timestamp: Timestamp.fromDate(new Date()) }
  const added = new Map([[path, file]])
  return {
    commit: { ...fields, hash: Commit.hashCommit(fields), timestamp: Timestamp.formatTimestamp(fields.timestamp), files: TreeDiff.diffSnapshots(new Map(), added) },
    trees: [...edited.trees].map(([hash, entries]) => ({ hash, entries })),
    contents: new Map([[file.hash, bytes]]),
    // What it adds to its parent's (all a push of it needs).
    snapshot: added
  }
}

const push = async (a: ReturnType<typeof api>, owner: string, repo: string, branch: string, commits: ReadonlyArray<Built>, only: Partial<Pick<ReturnType<typeof pushBody>, "blobs" | "trees">> = {}) => {
  // Building a 20,000-file commit blocks this process for seconds (more under load), past the server's 5 s
  // keep-alive: a timer turn first lets the HTTP client drop the socket the server closed meanwhile, instead
  // of writing the push into it (EPIPE / "other side closed").
  await new Promise((r) => setTimeout(r, 1))
  const body = { ...pushBody({ branch, commits, description: `merge ${branch}` }), ...only }
  let reply = await finalAnswer(a, await a.post(`/${owner}/${repo}/push`, body))
  // A busy embedded database (after a 100,000-file import) may answer 503, retryable: as grove does, try again.
  for (let tries = 1; tries < 10 && reply.status === 503 && reply.body?.retryable === true; tries++) {
    await new Promise((r) => setTimeout(r, 1000))
    reply = await finalAnswer(a, await a.post(`/${owner}/${repo}/push`, body))
  }
  if (reply.status !== 200 || reply.body.success !== true) throw new Error(`push ${repo}/${branch}: ${JSON.stringify(reply.body)}`)
}

/** Merges every branch of a repository one after another; latencies in ms. */
const mergeAll = async (url: string, token: string, owner: string, repo: string, branches: ReadonlyArray<string>, latencies: Array<number>) => {
  const a = api(url, token)
  for (const branch of branches) {
    for (;;) {
      const t0 = performance.now()
      const reply = await a.post(`/${owner}/${repo}/branches/${branch}/merge`)
      if (reply.status === 409 && reply.body.code === "main_moved") continue
      if (reply.status !== 200) throw new Error(`merge ${repo}/${branch}: ${reply.status} ${JSON.stringify(reply.body)}`)
      latencies.push(performance.now() - t0)
      break
    }
  }
}

/**
 * Commands of each kind sent untimed before its timed ones: the PATCH baseline's and each tree's merges alike.
 * Without it the first tree's row (the first merges a fresh server plans) carried the JIT's warm-up: its first
 * five merges cost ~2x the server CPU of the later ones, and the next tree's row started warm.
 */
export const WARM_UP = 10

const oneRepo = async (server: GroveServer, token: string, owner: string, merges: number, treeFiles: number) => {
  const repo = treeFiles <= 1 ? "solo" : `solo-${treeFiles}`
  const branches = await prepare(server.url, token, owner, repo, WARM_UP + merges, treeFiles)
  await mergeAll(server.url, token, owner, repo, branches.slice(0, WARM_UP), [])
  return withCpu(server, async () => {
    const latencies: Array<number> = []
    const t0 = performance.now()
    await mergeAll(server.url, token, owner, repo, branches.slice(WARM_UP), latencies)
    return stats(latencies, (performance.now() - t0) / 1000)
  })
}

const manyRepos = async (nodes: ReadonlyArray<GroveServer>, token: string, owner: string, prefix: string) => {
  const urls = nodes.map((n) => n.url)
  const repos = Array.from({ length: REPOS }, (_, i) => `${prefix}${i}`)
  const prepared = await Promise.all(repos.map((repo, i) => prepare(urls[i % urls.length]!, token, owner, repo, PER_REPO)))
  const latencies: Array<number> = []
  const { result, cpu } = await cpuDuring(nodes.map((n) => n.process.pid!), async () => {
    const t0 = performance.now()
    await Promise.all(repos.map((repo, i) => mergeAll(urls[i % urls.length]!, token, owner, repo, prepared[i]!, latencies)))
    return stats(latencies, (performance.now() - t0) / 1000)
  })
  return { ...result, cpu }
}

/** `count` minimal commands one after another, after `WARM_UP` untimed ones (a warm-up of the command path). */
const baseline = async (server: GroveServer, token: string, owner: string, count: number) => {
  const a = api(server.url, token)
  await a.post("/repos", { name: "baseline" })
  const patch = async (i: number) => {
    const reply = await a.patch(`/${owner}/baseline/visibility`, { is_public: i % 2 === 0 })
    if (reply.status !== 200) throw new Error(`visibility: ${JSON.stringify(reply.body)}`)
  }
  for (let i = -WARM_UP; i < 0; i++) await patch(i)
  return withCpu(server, async () => {
    const latencies: Array<number> = []
    const t0 = performance.now()
    for (let i = 0; i < count; i++) {
      const s = performance.now()
      await patch(i)
      latencies.push(performance.now() - s)
    }
    return stats(latencies, (performance.now() - t0) / 1000)
  })
}

export interface MergeResult {
  /** The minimal entity command, serialized: the same-run baseline. */
  readonly baseline: Stats
  /** Serialized merges on one repository, per tree size (files on main). */
  readonly trees: ReadonlyArray<{ readonly files: number; readonly stats: Stats }>
}

/** Embedded: the baseline, then `merges` serialized merges on one repository per tree size. */
export const measureMerges = async (options: { readonly merges: number; readonly treeFiles: ReadonlyArray<number> }, server?: GroveServer): Promise<MergeResult> => {
  const own = server === undefined ? await startServer() : undefined
  const target = server ?? own!
  try {
    const token = await target.createUser("bench")
    const base = await baseline(target, token, "bench", options.merges)
    const trees: Array<{ files: number; stats: Stats }> = []
    for (const files of options.treeFiles) trees.push({ files, stats: await oneRepo(target, token, "bench", options.merges, files) })
    return { baseline: base, trees }
  } finally {
    await own?.stop()
  }
}

export const mergeMeasures = (r: MergeResult): Array<Measure> =>
  r.trees.map(({ files, stats }) => ({
    id: `merge.${files}`,
    name: `merges/s, one repository, ${files.toLocaleString("en")}-file tree`,
    value: stats.perSecond,
    unit: "/s",
    baselineName: "PATCH visibility/s",
    baseline: r.baseline.perSecond,
    better: "higher",
    goal: ">= 150/s, p99 < 50 ms",
    met: stats.perSecond >= 150 && stats.p99 < 50,
    // Serialized: a rate is one over the latency, so the latencies give the rate ratio's spread.
    samples: { value: stats.latencies, baseline: r.baseline.latencies, inverse: true },
    detail: `p50 ${stats.p50.toFixed(1)} ms, p99 ${stats.p99.toFixed(1)} ms, server CPU ${cpuText(stats)} per merge ` +
      `(baseline p50 ${r.baseline.p50.toFixed(1)} ms, ${cpuText(r.baseline)}) over ${stats.count} merges`
  }))

const cpuText = (s: Stats) => (s.cpuUs === undefined ? "n/a" : `${s.cpuUs.toFixed(0)} µs CPU`)

const line = (name: string, s: Stats, extra = "") =>
  console.log(`${name.padEnd(44)} ${String(s.count).padStart(5)}  ${s.perSecond.toFixed(1).padStart(8)}/s  p50 ${s.p50.toFixed(1).padStart(6)} ms  p99 ${s.p99.toFixed(1).padStart(6)} ms  ${cpuText(s).padStart(12)}/op ${extra}`)

/** Every node's health is 200: the group has given each node partitions. */
const settled = async (nodes: ReadonlyArray<GroveServer>) => {
  for (let i = 0; i < 600; i++) {
    const codes = await Promise.all(nodes.map((n) => fetch(`${n.url}/api/health`).then((r) => r.status, () => 0)))
    if (codes.every((c) => c === 200)) return
    await new Promise((r) => setTimeout(r, 250))
  }
  throw new Error("the nodes did not all become ready")
}

const main = async () => {
  const treeFiles = TREE_FILES.length > 0 ? TREE_FILES : [1]
  console.log(`merge benchmark: ${MERGES} serialized merges on one repository (tree of ${treeFiles.join(", ")} file(s)); ${REPOS} repositories x ${PER_REPO} merges at once\n`)
  const server = await startServer(BIN === undefined ? {} : { bin: BIN })
  try {
    const result = await measureMerges({ merges: MERGES, treeFiles }, server)
    const many = skipMany ? undefined : await manyRepos([server], await server.createUser("bench2"), "bench2", "r")
    console.log("embedded".padEnd(44), "count", "     rate", "       latency")
    line("baseline: PATCH visibility, serialized", result.baseline)
    for (const { files, stats: solo } of result.trees) {
      line(`merge, one repository, serialized${files > 1 ? `, ${files} files` : ""}`, solo, `(${(solo.perSecond / result.baseline.perSecond).toFixed(2)}x baseline)`)
      console.log(`  target >= 150 merges/s on one repository: ${solo.perSecond >= 150 ? "MET" : "NOT MET"}; p99 < 50 ms: ${solo.p99 < 50 ? "MET" : "NOT MET"}`)
    }
    if (many !== undefined) line(`merge, ${REPOS} repositories at once`, many)
  } finally {
    await server.stop()
  }
  if (skipKafka) return
  const infra = await startClusterInfra()
  const nodes: Array<GroveServer> = []
  try {
    const token = await createClusterUser(infra, "bench")
    const start = async (id: string) => {
      const node = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "30000" }, args: ["--node-id", id] })
      nodes.push(node)
      return node
    }
    await settled([await start("bench-1")])
    const one = await manyRepos(nodes, token, "bench", "one")
    for (let i = 2; i <= NODES; i++) await start(`bench-${i}`)
    // Let the group settle so every node owns partitions before timing.
    await settled(nodes)
    const all = await manyRepos(nodes, token, "bench", "all")
    console.log(`\nkafka + postgresql + minio, on ${os.cpus().length} cores`.padEnd(45), "count", "     rate", "       latency")
    line(`merge, ${REPOS} repositories, one node`, one)
    line(`merge, ${REPOS} repositories, ${NODES} nodes`, all, `(${(all.perSecond / one.perSecond).toFixed(2)}x one node; target >= ${(0.8 * NODES).toFixed(1)}x)`)
    console.log("\nCPU, one node:")
    for (const text of costReport(one.cpu, one.count, "merge")) console.log(text)
    console.log(`CPU, ${NODES} nodes (a node may run merges another node received: per merge of all):`)
    for (const text of costReport(all.cpu, all.count, "merge")) console.log(text)
  } finally {
    for (const node of nodes) await node.stop()
    await infra.close()
  }
}

if (import.meta.main) await main()
