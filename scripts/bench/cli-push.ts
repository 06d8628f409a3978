/**
 * The `grove` client's small operations against git's in the same run: `grove --version` (answered
 * before the command tree loads, a path no command takes: not a command's start-up), `grove --help`
 * (through the command tree, building every group's help text), `grove status --json` in a clean
 * checkout (a read-only command: start-up plus one scan of the tree; git: `git status --porcelain`), the no-op push and the one-file push (edit one small file,
 * commit — not timed —, push) on a checkout of the
 * content benchmark's tree (20k files / 200 MiB, or `--files 5000`: the table's 5k / 50 MiB), git
 * over smart HTTP on the same tree. With `--old DIR` (another checkout of this repository, e.g. a
 * `git worktree` of an older commit with its client bundled) that client is measured too, its runs
 * alternating with this one's on a checkout and repository of its own: an A/B in one sitting. With `--watch`, one
 * more checkout of this client (and of the older one, with `--old`) runs `grove watch start` (the opt-in file
 * watcher) and is measured in the same turns.
 *
 *   node scripts/bench/cli-push.ts [--files 20000|5000] [--runs 7] [--old /tmp/old-checkout] [--watch]
 *
 * `npm run bench` takes its 20k no-op and one-file push rows from `measureCliPush` (cli-push-rows.ts).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { startGitHttp } from "./content/gitHttp.ts"
import { cleanupAll, onCleanup, run, startGuarded } from "./content/procs.ts"
import { fmtMs, median } from "./content/report.ts"
import { ensureTree, FULL_SPEC, MIB, type TreeSpec } from "./content/tree.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")
const load = () => os.loadavg().map((l) => l.toFixed(1)).join(" ")

/** Each operation measured (`--version` alone skips the command tree, so it is no command's start-up). */
export const OPS = ["--version", "--help", "status", "no-op push", "one-file push"] as const
export type Op = (typeof OPS)[number]

export interface CliPushOptions {
  readonly files: number
  /** The tree's bytes (default: the content benchmark's, 200 MiB at 20k files, else 1 MiB per 100 files). */
  readonly totalBytes?: number | undefined
  readonly runs: number
  /** Another checkout of this repository whose client is measured in the same turns. */
  readonly oldRoot?: string | undefined
  /** One more checkout per client with `grove watch start`. */
  readonly watch: boolean
  /** The operations measured (all by default). */
  readonly ops?: ReadonlyArray<Op>
  readonly log?: (line: string) => void
}

export interface Sample {
  readonly ms: number
  readonly cpuMs: number
}

export interface CliPushResult {
  readonly files: number
  readonly totalBytes: number
  readonly runs: number
  /** The clients' labels ("grove", "grove (watch)", "grove (old)", ...). */
  readonly clients: ReadonlyArray<string>
  /** By `${who} ${op}` (who: "git" or a client's label), one sample per round, rounds in order. */
  readonly samples: ReadonlyMap<string, ReadonlyArray<Sample>>
  /** The load average (1/5/15 min) at each round's start. */
  readonly loads: ReadonlyArray<string>
}

/** Runs the rounds (the server, git's HTTP backend and the checkouts are made for them and removed after: cleanupAll). */
export const measureCliPush = async (options: CliPushOptions): Promise<CliPushResult> => {
  const { files, oldRoot, runs } = options
  const log = options.log ?? ((line: string) => console.error(line))
  const ops = new Set<Op>(options.ops ?? OPS)
  const watch = options.watch
  // The content benchmark's trees (cached in ~/.cache/grove): the table's 5k one, or the full 20k one.
  const spec: TreeSpec = files === 20_000 && options.totalBytes === undefined
    ? FULL_SPEC
    : { files, totalBytes: options.totalBytes ?? Math.round(files / 100) * MIB, bigBytes: 12 * MIB, seed: FULL_SPEC.seed }
  const tree = ensureTree(spec, log)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-cli-push-"))
  onCleanup(() => fs.rmSync(tmp, { recursive: true, force: true }))

  // Each client runs its own bundle (built now, as `npm install` leaves it), pinned for the run.
  const clients = [
    { label: "grove", root: ROOT, watch: false },
    ...(watch ? [{ label: "grove (watch)", root: ROOT, watch: true }] : []),
    ...(oldRoot === undefined ? [] : [{ label: "grove (old)", root: path.resolve(oldRoot), watch: false }]),
    // The older client with its own watcher too: the watched rows' A/B.
    ...(oldRoot === undefined || !watch ? [] : [{ label: "grove (old, watch)", root: path.resolve(oldRoot), watch: true }])
  ]
  for (const root of new Set(clients.map((c) => c.root))) await run(process.execPath, [path.join(root, "packages/cli/scripts/bundle.ts")])

  // ---- git over smart HTTP ----
  const gitConfig = path.join(tmp, "gitconfig")
  fs.writeFileSync(gitConfig, "[user]\n\tname = bench\n\temail = bench@example.com\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n[gc]\n\tauto = 0\n")
  const gitEnv = { ...process.env, GIT_CONFIG_GLOBAL: gitConfig, GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0" }
  const projects = path.join(tmp, "git-root")
  fs.mkdirSync(projects)
  const gitHttp = await startGitHttp(projects, gitEnv)
  onCleanup(gitHttp.close)
  const gitWork = path.join(tmp, "git-work")
  const git = (args: ReadonlyArray<string>, cwd = gitWork) => run("git", args, { cwd, env: gitEnv })
  await run("cp", ["-a", `${tree.dir}/.`, gitWork])
  await git(["init", "-q"])
  await git(["add", "-A"])
  await git(["commit", "-q", "-m", "tree"])
  await git(["init", "-q", "--bare", path.join(projects, "r.git")], tmp)
  await git(["config", "http.receivepack", "true"], path.join(projects, "r.git"))
  await git(["remote", "add", "origin", `${gitHttp.url}/r.git`])
  await git(["push", "-q", "origin", "main"])

  // ---- the grove server and one checkout and repository per client ----
  const serverBin = path.join(ROOT, "packages/server/bin/grove-server.js")
  const dataDir = path.join(tmp, "grove-data")
  const server = await startGuarded(process.execPath, [serverBin, "serve", "--port", "0", "--data-dir", dataDir], /listening on (http:\/\/\S+)/)
  onCleanup(server.stop)
  const remote = server.match[1]!
  const made = await run(process.execPath, [serverBin, "user", "create", "bench", "--data-dir", dataDir])
  const key = made.stdout.trim().split("\n").at(-1)!
  const env = { ...process.env, GROVE_BUNDLE: "1", SERVICE_API_KEY: key, GROVE_REMOTE: remote }
  const checkouts = await Promise.all(clients.map(async (c, i) => {
    const dir = path.join(tmp, `checkout-${i}`)
    await run("cp", ["-a", `${tree.dir}/.`, dir])
    return { ...c, dir, bin: path.join(c.root, "packages/cli/bin/grove.js") }
  }))
  const grove = (c: (typeof checkouts)[number], args: ReadonlyArray<string>) => run(process.execPath, [c.bin, ...args], { cwd: c.dir, env })
  for (const [i, c] of checkouts.entries()) {
    await grove(c, ["init", "--owner", "bench", "--name", `tree${i}`, "--json"])
    await grove(c, ["commit", "--json"])
    const pushed = await grove(c, ["push", "--json"])
    log(`${c.label}: first push ${fmtMs(pushed.ms)} (not timed)`)
    if (c.watch) {
      await grove(c, ["watch", "start"])
      onCleanup(async () => void (await grove(c, ["watch", "stop"])))
    }
  }

  // ---- alternating rounds ----
  const samples = new Map<string, Array<Sample>>()
  const add = (name: string, s: Sample) => samples.set(name, [...(samples.get(name) ?? []), { ms: s.ms, cpuMs: s.cpuMs }])
  const loads: Array<string> = []
  for (let round = 0; round < runs; round++) {
    loads.push(load())
    if (ops.has("--version")) add("git --version", await run("git", ["--version"]))
    if (ops.has("--help")) add("git --help", await run("git", ["--help"]))
    if (ops.has("status")) {
      const gitStatus = await git(["status", "--porcelain"])
      if (gitStatus.stdout.trim() !== "") throw new Error(`git: the checkout is not clean: ${gitStatus.stdout}`)
      add("git status", gitStatus)
    }
    if (ops.has("no-op push")) add("git no-op push", await git(["push", "-q", "origin", "main"]))
    const line = `// edited by the benchmark, round ${round + 1}\n`
    const rel = tree.manifest.smallFiles[round % tree.manifest.smallFiles.length]!
    if (ops.has("one-file push")) {
      fs.appendFileSync(path.join(gitWork, rel), line)
      await git(["commit", "-q", "-a", "-m", "change"])
      add("git one-file push", await git(["push", "-q", "origin", "main"]))
    }
    for (const c of round % 2 === 0 ? checkouts : [...checkouts].reverse()) {
      if (ops.has("--version")) add(`${c.label} --version`, await grove(c, ["--version"]))
      if (ops.has("--help")) add(`${c.label} --help`, await grove(c, ["--help"]))
      if (ops.has("status")) {
        const status = await grove(c, ["status", "--json"])
        if (JSON.parse(status.stdout).changes.length !== 0) throw new Error(`${c.label}: the checkout is not clean: ${status.stdout}`)
        add(`${c.label} status`, status)
      }
      if (ops.has("no-op push")) {
        const noop = await grove(c, ["push", "--json"])
        if (JSON.parse(noop.stdout).pushed_commits !== 0) throw new Error(`${c.label}: the no-op push pushed: ${noop.stdout}`)
        add(`${c.label} no-op push`, noop)
      }
      if (ops.has("one-file push")) {
        fs.appendFileSync(path.join(c.dir, rel), line)
        await grove(c, ["commit", "--json"])
        const pushed = await grove(c, ["push", "--json"])
        if (JSON.parse(pushed.stdout).pushed_commits !== 1) throw new Error(`${c.label}: the one-file push did not push one commit: ${pushed.stdout}`)
        add(`${c.label} one-file push`, pushed)
      }
    }
  }
  return { files: tree.manifest.entries.length, totalBytes: tree.manifest.totalBytes, runs, clients: clients.map((c) => c.label), samples, loads }
}

if (import.meta.main) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`)
    return i > 0 ? process.argv[i + 1] : undefined
  }
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    // The usage is this file's header (not a 20k-file run, which is what an unknown flag still gets).
    const source = fs.readFileSync(import.meta.filename, "utf8")
    console.log(source.slice(source.indexOf("/**") + 3, source.indexOf("*/")).replace(/^ \* ?/gm, "").trim())
    process.exit(0)
  }
  try {
    const { clients, loads, runs, samples, files } = await measureCliPush({
      files: Number(arg("files") ?? 20_000),
      runs: Number(arg("runs") ?? 7),
      oldRoot: arg("old"),
      watch: process.argv.includes("--watch")
    })
    console.log(`${files} files; median of ${runs} alternating rounds; load (1/5/15 min) per round: ${loads.join(" | ")}`)
    // CPU (user + system of the client and its children) is counted in 10 ms ticks: the mean shows what the median rounds away.
    console.log(`measure                            | wall (median; all)                         | client CPU median / mean | vs git`)
    // `--version` alone skips the command tree (main.ts), so it is no command's start-up; `--help` and `status` go through it.
    const shown: Record<string, string> = { "--version": "--version (no cmd tree)", "--help": "--help (cmd tree)", status: "status --json" }
    const label = (who: string, op: string) => `${who} ${who === "git" ? (op === "status" ? "status --porcelain" : op) : shown[op] ?? op}`
    for (const op of OPS) {
      const gitMs = median((samples.get(`git ${op}`) ?? []).map((s) => s.ms))
      for (const who of ["git", ...clients]) {
        const xs = samples.get(`${who} ${op}`) ?? []
        const wall = median(xs.map((s) => s.ms))
        console.log(
          `${label(who, op).padEnd(34)} | ${fmtMs(wall).padEnd(7)} (${xs.map((s) => s.ms.toFixed(0)).join(", ")})`.padEnd(82) +
            ` | ${`${fmtMs(median(xs.map((s) => s.cpuMs)))} / ${fmtMs(xs.reduce((sum, s) => sum + s.cpuMs, 0) / xs.length)}`.padEnd(24)} | ${
              who === "git" ? "" : `${(wall / gitMs).toFixed(2)}x`
            }`
        )
      }
    }
  } finally {
    await cleanupAll()
  }
}
