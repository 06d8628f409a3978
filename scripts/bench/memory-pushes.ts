/**
 * The table's "RSS after the clone" scenario, focused (`npm run bench -- --only content` runs it inside the whole
 * content benchmark): a first-booted embedded server as shipped (the bundle) takes three pushes of the table's tree
 * (5,000 files, 50 MiB; a new user and repository each) and one clone of the first. Prints the RSS right after each
 * transfer (as the table samples it) and 3 s later, by kind of mapping (memory.ts's `residentByKind`), and each
 * transfer's wall time and server CPU.
 *
 *   node scripts/bench/memory-pushes.ts [--rounds N] [--env NAME=VALUE ...] [--malloc-probe]
 *
 * `--malloc-probe` (needs gcc) preloads memory-malloc-probe.c into the server: after each transfer it prints glibc
 * malloc's arenas (in use and free) and the bytes live in allocations under 128 KiB by size class at their peak,
 * and 30 s after the clone it calls malloc_trim(0) once: what the RSS is without the arenas' free pages.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { CLI_BIN, type GroveServer, ROOT, run, startServer } from "../../test/support/GroveServer.ts"
import { type Kind, residentByKind, rssMiB } from "./memory.ts"
import { ensureTree, MIB, type TreeSpec } from "./content/tree.ts"
import { cpuOf } from "./content/procs.ts"

/** As scripts/bench/table.ts sizes the content benchmark. */
const TABLE_SPEC: TreeSpec = { files: 5_000, totalBytes: 50 * MIB, bigBytes: 12 * MIB, seed: 0x5eed_2024 }
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const fmt = (n: number) => n.toFixed(0).padStart(4)
const kinds = (k: Record<Kind, number>) => (Object.entries(k) as Array<[Kind, number]>).map(([name, kib]) => `${name} ${fmt(kib / 1024)}`).join(" ")
const snap = (pid: number) => `${fmt(rssMiB(pid))} (${kinds(residentByKind(pid))})`

/** Builds the malloc probe into `dir`; the server's environment to load it. */
const mallocProbe = (dir: string): NodeJS.ProcessEnv => {
  const source = path.join(import.meta.dirname, "memory-malloc-probe.c")
  execFileSync("gcc", ["-O2", "-shared", "-fPIC", "-o", path.join(dir, "probe.so"), source, "-lpthread"], { stdio: "inherit" })
  return { LD_PRELOAD: path.join(dir, "probe.so"), GROVE_MALLOC_PROBE_DIR: dir }
}

/** Asks the preloaded probe (what: "info" or "trim") and returns its answer. */
const askProbe = async (dir: string, pid: number, what: string): Promise<string> => {
  const out = path.join(dir, `out.${pid}`)
  fs.rmSync(out, { force: true })
  fs.writeFileSync(path.join(dir, `req.${pid}`), what)
  for (let i = 0; i < 300; i++) {
    const text = fs.existsSync(out) ? fs.readFileSync(out, "utf8") : ""
    if (text.includes("done\n")) return text.replace("done\n", "").trimEnd()
    await sleep(100)
  }
  return "(the malloc probe did not answer)"
}

const round = async (tree: string, env: NodeJS.ProcessEnv, say: (line: string) => void, probe: boolean) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-memory-pushes-"))
  const dataDir = path.join(tmp, "data")
  let server: GroveServer | undefined
  try {
    const probeEnv = probe ? mallocProbe(tmp) : {}
    server = await startServer({ dataDir, env: { ...env, ...probeEnv } })
    const pid = server.process.pid!
    const malloc = async (what: string) => probe ? say(`  ${(await askProbe(tmp, pid, what)).split("\n").join("\n  ")}`) : undefined
    await sleep(3000)
    say(`first boot, idle 3 s        ${snap(pid)}`)
    const grove = async (args: ReadonlyArray<string>, cwd: string, key: string) => {
      const before = cpuOf(pid)
      const started = performance.now()
      const ran = await run(CLI_BIN, args, { cwd, env: { GROVE_BUNDLE: "1", SERVICE_API_KEY: key, GROVE_REMOTE: server!.url }, timeoutMs: 1_200_000 })
      if (ran.code !== 0) throw new Error(`grove ${args.join(" ")}: exit ${ran.code}\n${ran.stdout.slice(-2000)}${ran.stderr.slice(-2000)}`)
      return { json: JSON.parse(ran.stdout) as Record<string, unknown>, ms: performance.now() - started, cpu: cpuOf(pid) - before }
    }
    const checkout = path.join(tmp, "checkout")
    fs.cpSync(tree, checkout, { recursive: true })
    let first = { key: "", branch: "" }
    for (let i = 1; i <= 3; i++) {
      const key = await server.createUser(`bench${i}`)
      // Not fs.rmSync: the last push left its kept blobs to a detached remover (ObjectFiles.dropAllKeptBlobs) that may
      // still be unlinking under .grove/objects, and Node 24's native rmSync takes an entry gone under it (ENOENT) for
      // "done" and returns with the rest of .grove there (state.json: init refuses). fs.promises.rm, as `rm -rf`, goes on.
      await fs.promises.rm(path.join(checkout, ".grove"), { recursive: true, force: true })
      const init = await grove(["init", "--owner", `bench${i}`, "--name", "tree", "--json"], checkout, key)
      if (i === 1) first = { key, branch: String(init.json["branch"]) }
      await grove(["commit", "--json"], checkout, key)
      const pushed = await grove(["push", "--json"], checkout, key)
      say(`push ${i}: ${(pushed.ms / 1000).toFixed(2)} s, server CPU ${(pushed.cpu / 1000).toFixed(2)} s; right after ${snap(pid)}`)
      await malloc("info")
    }
    const cloned = await grove(["clone", "bench1/tree", path.join(tmp, "clone"), "--branch", first.branch, "--json"], tmp, first.key)
    say(`clone: ${(cloned.ms / 1000).toFixed(2)} s, server CPU ${(cloned.cpu / 1000).toFixed(2)} s; right after ${snap(pid)}`)
    await malloc("info")
    await sleep(3000)
    say(`3 s after the clone          ${snap(pid)}`)
    // The server's idle collection (ops/IdleGc.ts) looks every 10 s.
    await sleep(27_000)
    say(`30 s after the clone         ${snap(pid)}`)
    if (probe) {
      await malloc("trim")
      say(`after malloc_trim(0)         ${snap(pid)}`)
    }
  } finally {
    await server?.stop()
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

const main = async () => {
  const env = { GROVE_BUNDLE: "1", ...Object.fromEntries(process.argv.flatMap((arg, i) => process.argv[i - 1] === "--env" ? [arg.split(/=(.*)/s).slice(0, 2)] : [])) }
  const rounds = Number(process.argv[process.argv.indexOf("--rounds") + 1] ?? 1) || 1
  for (const script of ["packages/server/scripts/bundle.ts", "packages/cli/scripts/bundle.ts"]) {
    const bundled = await run(path.join(ROOT, script), ["--if-stale"], { timeoutMs: 300_000 })
    if (bundled.code !== 0 || bundled.stderr.includes("not bundling")) throw new Error(bundled.stderr)
  }
  const tree = ensureTree(TABLE_SPEC, (line) => console.error(line)).dir
  for (let r = 1; r <= rounds; r++) {
    console.log(`# ${ROOT} round ${r}, load ${os.loadavg()[0]!.toFixed(1)}, env ${JSON.stringify(env)}`)
    await round(tree, env, (line) => console.log(line), process.argv.includes("--malloc-probe"))
  }
}

await main()
