/**
 * Benchmark: squash merges through the Repository entity.
 *
 *   npm run bench:merge [-- --merges 200 --per-repo 40 --skip-kafka]
 *
 * Embedded: merges of prepared branches one after another on one repository (serialized by the
 * entity), and 16 repositories merged at once (one client per repository). Baseline in the same
 * run: a minimal entity command (PATCH visibility) on the same server, one after another.
 * Kafka: the 16-repository run against one node, then against two nodes (clients split between
 * them); the ratio two/one is the target (>= 1.6x). Branches are pushed before timing starts; each
 * adds its own file to a main made from a first merge, so every merge is clean.
 */
import { buildCommit, type Built, pushBody } from "../../../test/support/content.ts"
import { startClusterInfra } from "../../../test/support/ClusterInfra.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../../../test/support/GroveServer.ts"
import { api } from "../../../test/support/http.ts"
import { mainState } from "../../../test/support/Workload.ts"

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const MERGES = arg("merges", 200)
const PER_REPO = arg("per-repo", 40)
const REPOS = 16
const skipKafka = process.argv.includes("--skip-kafka")

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0

interface Stats {
  readonly count: number
  readonly seconds: number
  readonly perSecond: number
  readonly p50: number
  readonly p99: number
}

const stats = (latencies: Array<number>, seconds: number): Stats => {
  const sorted = [...latencies].sort((a, b) => a - b)
  return { count: sorted.length, seconds, perSecond: sorted.length / seconds, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) }
}

/** A repository whose main holds one file, and `count` branches that each add their own file. */
const prepare = async (url: string, token: string, owner: string, repo: string, count: number) => {
  const a = api(url, token)
  const created = await a.post("/repos", { name: repo })
  if (created.status !== 201 && created.status !== 202) throw new Error(`create ${repo}: ${JSON.stringify(created.body)}`)
  for (let i = 0; i < 100 && (await a.get(`/${owner}/${repo}`)).status !== 200; i++) await new Promise((r) => setTimeout(r, 100))
  const base = buildCommit({ branch: "base", files: { "README.md": `# ${repo}\n` } })
  await push(a, owner, repo, "base", [base])
  const merged = await a.post(`/${owner}/${repo}/branches/base/merge`)
  if (merged.status !== 200) throw new Error(`base merge: ${JSON.stringify(merged.body)}`)
  const main = await mainState(url, token, owner, repo)
  const branches: Array<string> = []
  for (let i = 0; i < count; i++) {
    const branch = `b${i}`
    const c = buildCommit({ branch, files: { "README.md": `# ${repo}\n`, [`files/${i}.txt`]: `file ${i} of ${repo}\n` }, parentHash: main.head, parentSnapshot: main.snapshot })
    await push(a, owner, repo, branch, [c])
    branches.push(branch)
  }
  return branches
}

const push = async (a: ReturnType<typeof api>, owner: string, repo: string, branch: string, commits: ReadonlyArray<Built>) => {
  const reply = await a.post(`/${owner}/${repo}/push`, pushBody({ branch, commits, description: `merge ${branch}` }))
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

const oneRepo = async (server: GroveServer, token: string, owner: string) => {
  const branches = await prepare(server.url, token, owner, "solo", MERGES)
  const latencies: Array<number> = []
  const t0 = performance.now()
  await mergeAll(server.url, token, owner, "solo", branches, latencies)
  return stats(latencies, (performance.now() - t0) / 1000)
}

const manyRepos = async (urls: ReadonlyArray<string>, token: string, owner: string, prefix: string) => {
  const repos = Array.from({ length: REPOS }, (_, i) => `${prefix}${i}`)
  const prepared = await Promise.all(repos.map((repo, i) => prepare(urls[i % urls.length]!, token, owner, repo, PER_REPO)))
  const latencies: Array<number> = []
  const t0 = performance.now()
  await Promise.all(repos.map((repo, i) => mergeAll(urls[i % urls.length]!, token, owner, repo, prepared[i]!, latencies)))
  return stats(latencies, (performance.now() - t0) / 1000)
}

const baseline = async (server: GroveServer, token: string, owner: string) => {
  const a = api(server.url, token)
  await a.post("/repos", { name: "baseline" })
  const latencies: Array<number> = []
  const t0 = performance.now()
  for (let i = 0; i < MERGES; i++) {
    const s = performance.now()
    const reply = await a.patch(`/${owner}/baseline/visibility`, { is_public: i % 2 === 0 })
    if (reply.status !== 200) throw new Error(`visibility: ${JSON.stringify(reply.body)}`)
    latencies.push(performance.now() - s)
  }
  return stats(latencies, (performance.now() - t0) / 1000)
}

const line = (name: string, s: Stats, extra = "") =>
  console.log(`${name.padEnd(44)} ${String(s.count).padStart(5)}  ${s.perSecond.toFixed(1).padStart(8)}/s  p50 ${s.p50.toFixed(1).padStart(6)} ms  p99 ${s.p99.toFixed(1).padStart(6)} ms ${extra}`)

const main = async () => {
  console.log(`merge benchmark: ${MERGES} serialized merges on one repository; ${REPOS} repositories x ${PER_REPO} merges at once\n`)
  const server = await startServer()
  try {
    const token = await server.createUser("bench")
    const base = await baseline(server, token, "bench")
    const solo = await oneRepo(server, token, "bench")
    const many = await manyRepos([server.url], token, "bench", "r")
    console.log("embedded".padEnd(44), "count", "     rate", "       latency")
    line("baseline: PATCH visibility, serialized", base)
    line("merge, one repository, serialized", solo, `(${(solo.perSecond / base.perSecond).toFixed(2)}x baseline)`)
    line(`merge, ${REPOS} repositories at once`, many)
    console.log(`  target >= 100 merges/s on one repository: ${solo.perSecond >= 100 ? "MET" : "NOT MET"}; p99 < 100 ms: ${solo.p99 < 100 ? "MET" : "NOT MET"}`)
  } finally {
    await server.stop()
  }
  if (skipKafka) return
  const infra = await startClusterInfra()
  const nodes: Array<GroveServer> = []
  try {
    const created = await run(SERVER_BIN, ["user", "create", "bench"], { env: infra.env })
    const token = created.stdout.trim().split("\n").pop()!
    const start = async (id: string) => {
      const node = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "30000" }, args: ["--node-id", id] })
      nodes.push(node)
      return node
    }
    const a = await start("bench-a")
    const one = await manyRepos([a.url], token, "bench", "one")
    const b = await start("bench-b")
    // Let the group settle so both nodes own partitions before timing.
    await new Promise((r) => setTimeout(r, 8000))
    const two = await manyRepos([a.url, b.url], token, "bench", "two")
    console.log("\nkafka + postgresql".padEnd(45), "count", "     rate", "       latency")
    line(`merge, ${REPOS} repositories, one node`, one)
    line(`merge, ${REPOS} repositories, two nodes`, two, `(${(two.perSecond / one.perSecond).toFixed(2)}x one node; target >= 1.6x)`)
  } finally {
    for (const node of nodes) await node.stop()
    await infra.close()
  }
}

await main()
