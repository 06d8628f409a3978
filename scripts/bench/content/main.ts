/**
 * Benchmark: `grove push` / `grove clone` of a 20,000-file, ~200 MiB tree
 * (one 50 MiB incompressible binary) against `git push` / `git clone` of the
 * same tree over smart HTTP (`git http-backend` on 127.0.0.1), measured in the
 * same run, plus the no-op push, a one-file change, a one-byte insert at the
 * start of the 50 MiB file and the server's RSS growth during a clone. Both
 * tools talk through the same counting proxy (bytes, chunk frames, per-route
 * timings for the phase breakdown).
 *
 *   npm run bench:content [-- --runs 3 --small]
 *   npm run bench:content -- --pushes-only   # the no-op and one-file push rows at 20k files (no clone rounds)
 *   npm run bench:content -- --clone-pairs 6  # six more clones of each tool, back to back, for steadier clone rows
 *   npm run bench:content -- --files 100000 --mib 400 --runs 1   # another tree size
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { startGitHttp } from "./gitHttp.ts"
import { cleanupAll, cpuOf, onCleanup, rssOf, run, sampleRss, startGuarded } from "./procs.ts"
import { type Exchange, startProxy } from "./proxy.ts"
import { compareTree, ensureTree, FULL_SPEC, MIB, SMALL_SPEC, type TreeSpec } from "./tree.ts"
import { fmtBytes, fmtMs, median, phases, printReport, type Row } from "./report.ts"

const ROOT = path.resolve(import.meta.dirname, "../../..")
const SERVER_BIN = path.join(ROOT, "packages/server/bin/grove-server.js")
const CLI_BIN = path.join(ROOT, "packages/cli/bin/grove.js")
const argValue = (name: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : undefined
}
const SMALL_RUNS = 3
/** When the RSS "after the clone" is sampled: this long after the clone returned. */
export const SETTLED_MS = 10_000

export interface ContentOptions {
  readonly spec: TreeSpec
  /** Rounds of the big push and clone (each tool), at most. */
  readonly runs: number
  /** Further rounds stop early past this (the whole run should stay near 10 minutes). */
  readonly budgetMs: number
  /** Also git's push from a repacked repository (a row of the report, not of the table). Default true. */
  readonly packed?: boolean
  /**
   * Only what the no-op and one-file push rows need: one round of the big pushes (the checkouts they
   * start from) and git's clone, no grove clone, no packed push (`--pushes-only`).
   */
  readonly pushesOnly?: boolean
  /**
   * Clones of both tools back to back after the rounds (which tool first alternates), for the clone rows: a round's
   * two clones lie pushes apart, and on this shared host one spell of steal or throttling inflated one tool's clones
   * 2-4x (3 rounds gave 1.42x / 0.38x / 0.99x for the same code). These pairs skip the rounds' RSS settling wait.
   */
  readonly clonePairs?: number
}

let began = performance.now()
const log = (line: string) => console.error(`[${((performance.now() - began) / 1000).toFixed(1).padStart(6)} s] ${line}`)
const sum = (xs: ReadonlyArray<Exchange>, f: (x: Exchange) => number) => xs.reduce((s, x) => s + f(x), 0)
/** grove's sample over git's of the same round (the rounds alternate the tools): the rows' spread. */
const both = (cpu: { client: number; server: number }) => cpu.client + cpu.server
const paired = (grove: ReadonlyArray<number>, git: ReadonlyArray<number>) => grove.slice(0, git.length).map((g, i) => g / git[i]!)

/** The whole content benchmark; answers its report and the medians the table shows. */
export const measureContent = async ({ spec, runs: RUNS, budgetMs: BUDGET_MS, packed: PACKED = true, pushesOnly = false, clonePairs = 0 }: ContentOptions) => {
  began = performance.now()
  // The client as `npm install` leaves it (bundled, see packages/cli/scripts/bundle.ts): sources edited
  // since the last install would otherwise run unbundled and measure module loading instead.
  const bundled = await run(process.execPath, [path.join(ROOT, "packages/cli/scripts/bundle.ts")])
  // That bundle even if sources are edited during the run (unless GROVE_NO_BUNDLE=1 asks for the sources).
  const bundle = process.env.GROVE_NO_BUNDLE === "1" ? {} : { GROVE_BUNDLE: "1" }
  log(`grove client bundled in ${fmtMs(bundled.ms)} (not timed); the runs use ${process.env.GROVE_NO_BUNDLE === "1" ? "the sources" : "this bundle"}`)
  const tree = ensureTree(spec, log)
  const { manifest } = tree
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-content-"))
  onCleanup(() => fs.rmSync(tmp, { recursive: true, force: true }))
  log(`tree ${tree.dir}: ${manifest.entries.length} files, ${fmtBytes(manifest.totalBytes)}; temp ${tmp}`)

  // ---- git over smart HTTP -------------------------------------------------
  const gitConfig = path.join(tmp, "gitconfig")
  fs.writeFileSync(gitConfig, "[user]\n\tname = bench\n\temail = bench@example.com\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n[gc]\n\tauto = 0\n")
  // No background auto-gc: `git commit` would otherwise start a detached repack that races the first push.
  const gitEnv: NodeJS.ProcessEnv = { ...process.env, GIT_CONFIG_GLOBAL: gitConfig, GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0" }
  const projectRoot = path.join(tmp, "git-root")
  fs.mkdirSync(projectRoot)
  const gitHttp = await startGitHttp(projectRoot, gitEnv)
  onCleanup(gitHttp.close)
  const gitProxy = await startProxy(gitHttp.url)
  onCleanup(gitProxy.close)
  const git = (args: ReadonlyArray<string>, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
    run("git", args, { env: { ...gitEnv, ...options.env }, ...(options.cwd === undefined ? {} : { cwd: options.cwd }) })

  const srcEnv = { GIT_DIR: path.join(tmp, "src.git"), GIT_WORK_TREE: tree.dir }
  await git(["init", "-q"], { env: srcEnv })
  const added = await git(["add", "-A"], { env: srcEnv })
  const committed = await git(["commit", "-q", "-m", "tree"], { env: srcEnv })
  log(`git add ${fmtMs(added.ms)}, git commit ${fmtMs(committed.ms)} (not timed as push)`)
  const loadAtStart = os.loadavg()[0]!

  const gitPush: Array<number> = []
  const gitPushBytes: Array<number> = []
  const gitPushCpu: Array<number> = []
  const gitPushOnce = async (i: number) => {
    const bare = path.join(projectRoot, `r${i}.git`)
    await git(["init", "-q", "--bare", bare])
    await git(["config", "http.receivepack", "true"], { cwd: bare })
    const since = gitProxy.mark()
    const pushed = await git(["push", "-q", `${gitProxy.url}/r${i}.git`, "main:main"], { env: srcEnv })
    gitPush.push(pushed.ms)
    gitPushBytes.push(sum(since(), (x) => x.requestBytes))
    gitPushCpu.push(pushed.cpuMs)
    log(`git push #${i}: ${fmtMs(pushed.ms)} (CPU of git client + http-backend ${fmtMs(pushed.cpuMs)}), ${fmtBytes(gitPushBytes.at(-1)!)} sent`)
  }
  const gitClone: Array<number> = []
  const gitCloneBytes: Array<number> = []
  const gitCloneCpu: Array<number> = []
  const gitWork = path.join(tmp, "git-work")
  const gitCloneOnce = async (i: number) => {
    const dest = i === 1 ? gitWork : path.join(tmp, `git-clone-${i}`)
    const since = gitProxy.mark()
    const cloned = await git(["clone", "-q", `${gitProxy.url}/r1.git`, dest])
    gitClone.push(cloned.ms)
    gitCloneBytes.push(sum(since(), (x) => x.responseBytes))
    gitCloneCpu.push(cloned.cpuMs)
    log(`git clone #${i}: ${fmtMs(cloned.ms)} (CPU of git client + http-backend ${fmtMs(cloned.cpuMs)}), ${fmtBytes(gitCloneBytes.at(-1)!)} received`)
    if (i === 1) {
      const problems = compareTree(dest, manifest.entries)
      if (problems.length > 0) throw new Error(`git clone differs from the tree:\n${problems.join("\n")}`)
    }
    // Left until the end (KEPT_CLONES), as grove's clones are.
  }

  // ---- grove ---------------------------------------------------------------
  const dataDir = path.join(tmp, "grove-data")
  const server = await startGuarded(process.execPath, [SERVER_BIN, "serve", "--port", "0", "--data-dir", dataDir], /listening on (http:\/\/\S+)/)
  onCleanup(server.stop)
  const groveProxy = await startProxy(server.match[1]!)
  onCleanup(groveProxy.close)
  const rssAtStart = rssOf(server.pid)
  log(`grove server pid ${server.pid} at ${server.match[1]}, RSS ${fmtBytes(rssAtStart)}, proxy ${groveProxy.url}`)
  const createUser = async (name: string) => {
    const made = await run(process.execPath, [SERVER_BIN, "user", "create", name, "--data-dir", dataDir])
    return made.stdout.trim().split("\n").at(-1)!
  }
  const grove = async (args: ReadonlyArray<string>, key: string, cwd: string, extraEnv: NodeJS.ProcessEnv = {}) => {
    const serverBefore = cpuOf(server.pid)
    const ran = await run(process.execPath, [CLI_BIN, ...args], { cwd, env: { ...process.env, ...bundle, SERVICE_API_KEY: key, GROVE_REMOTE: groveProxy.url, ...extraEnv } })
    return { ...ran, serverCpuMs: cpuOf(server.pid) - serverBefore, json: JSON.parse(ran.stdout) as Record<string, unknown> }
  }
  const help = () => run(process.execPath, [CLI_BIN, "--help"], { env: { ...process.env, ...bundle } })
  const startupMs = median([(await help()).ms, (await help()).ms])

  const checkout = path.join(tmp, "grove-checkout")
  await run("cp", ["-a", `${tree.dir}/.`, checkout])
  const grovePush: Array<number> = []
  const grovePushBytes: Array<number> = []
  const grovePushCpu: Array<{ client: number; server: number }> = []
  const pushPhases: Array<string> = []
  let key = ""
  let branch = ""
  const grovePushOnce = async (i: number) => {
    key = await createUser(`bench${i}`)
    // Not fs.rmSync, which returns early when the last push's detached blob remover wins a race (see memory-pushes.ts).
    await fs.promises.rm(path.join(checkout, ".grove"), { recursive: true, force: true })
    const init = await grove(["init", "--owner", `bench${i}`, "--name", "tree", "--remote", groveProxy.url, "--json"], key, checkout)
    branch = String(init.json["branch"])
    const commit = await grove(["commit", "--json"], key, checkout)
    const since = groveProxy.mark()
    const pushed = await grove(["push", "--json"], key, checkout)
    const exchanges = since()
    grovePush.push(pushed.ms)
    grovePushCpu.push({ client: pushed.cpuMs, server: pushed.serverCpuMs })
    grovePushBytes.push(sum(exchanges, (x) => x.requestBytes))
    log(`grove commit #${i}: ${fmtMs(commit.ms)} (not timed as push); grove push #${i}: ${fmtMs(pushed.ms)}, ${fmtBytes(grovePushBytes.at(-1)!)} sent; ${JSON.stringify(pushed.json)}`)
    pushPhases.push(phases(`grove push #${i}`, pushed, exchanges, `bench${i}/tree`))
  }
  const groveClone: Array<number> = []
  const groveCloneBytes: Array<number> = []
  const rssGrowth: Array<number> = []
  const rssBeforeClone: Array<number> = []
  const rssAfterClone: Array<number> = []
  const rssRightAfterClone: Array<number> = []
  const rssPeakClone: Array<number> = []
  const groveCloneCpu: Array<{ client: number; server: number }> = []
  const clonePhases: Array<string> = []
  /** One timed grove clone; with `rss`, the server's RSS around it, sampled until it has settled (SETTLED_MS). */
  const groveCloneOnce = async (i: number, rss: boolean) => {
    const dest = path.join(tmp, `grove-clone-${i}`)
    const since = groveProxy.mark()
    const stopSampling = sampleRss(server.pid)
    const cloned = await grove(["clone", "bench1/tree", dest, "--branch", firstBranch, "--remote", groveProxy.url, "--json"], firstKey, tmp)
    const sampled = stopSampling()
    const returned = performance.now()
    const exchanges = since()
    groveClone.push(cloned.ms)
    groveCloneCpu.push({ client: cloned.cpuMs, server: cloned.serverCpuMs })
    groveCloneBytes.push(sum(exchanges, (x) => x.responseBytes))
    if (rss) {
      rssRightAfterClone.push(rssOf(server.pid))
      rssGrowth.push(sampled.peak - sampled.first)
      rssBeforeClone.push(sampled.first)
      rssPeakClone.push(sampled.peak)
    }
    log(`grove clone #${i}: ${fmtMs(cloned.ms)}, ${fmtBytes(groveCloneBytes.at(-1)!)} received, server RSS ${fmtBytes(sampled.first)} -> peak ${fmtBytes(sampled.peak)}`)
    clonePhases.push(phases(`grove clone #${i}`, cloned, exchanges, "bench1/tree"))
    const problems = compareTree(dest, manifest.entries)
    if (problems.length > 0) throw new Error(`grove clone #${i} differs from the tree:\n${problems.join("\n")}`)
    // KEPT_CLONES: a clone removed here would make the next timed clone (either tool's) pay for it: ext4 passes
    // over inodes freed in the last seconds (minutes while their table block is dirty) when it allocates new ones
    // (recently_deleted), so 5,000 files created right after 5,000 were removed cost ~0.5 s more system time
    // (seconds of wall on a busy machine). The temp directory goes at the end.
    // "After the clone": once the server has settled, SETTLED_MS after the clone returned (its idle collection,
    // ops/IdleGc.ts, runs 4-6 s after a transfer); the sample right after it returned is the row's detail.
    if (!rss) return
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, returned + SETTLED_MS - performance.now())))
    rssAfterClone.push(rssOf(server.pid))
  }

  // One round of everything first, then more rounds while the budget allows.
  await gitPushOnce(1)
  await gitCloneOnce(1)
  await grovePushOnce(1)
  const firstKey = key
  const firstBranch = branch
  if (!pushesOnly) await groveCloneOnce(1, true)
  const roundMs = performance.now() - began
  for (let i = 2; i <= (pushesOnly ? 1 : RUNS); i++) {
    const perRound = (gitPush[0]! + gitClone[0]! + grovePush[0]! + groveClone[0]!) * 1.6 + SETTLED_MS
    if (performance.now() - began + perRound > BUDGET_MS) {
      log(`stopping after ${i - 1} run(s) of push/clone: another would pass the ${BUDGET_MS / 1000} s budget`)
      break
    }
    await gitPushOnce(i)
    await gitCloneOnce(i)
    await grovePushOnce(i)
    await groveCloneOnce(i, true)
  }
  log(`first round took ${fmtMs(roundMs)}`)
  // The clone pairs: both tools' clones back to back, the first of a pair alternating. Clone numbers go on after
  // the rounds' (every clone is kept until the end: KEPT_CLONES). A pair costs ~2x a clone; never past the budget by more than one.
  const rounds = gitClone.length
  for (let p = 1; !pushesOnly && p <= clonePairs; p++) {
    if (performance.now() - began > BUDGET_MS + 60_000) {
      log(`stopping after ${p - 1} clone pair(s): past the budget`)
      break
    }
    const i = rounds + p
    if (p % 2 === 1) {
      await groveCloneOnce(i, false)
      await gitCloneOnce(i)
    } else {
      await gitCloneOnce(i)
      await groveCloneOnce(i, false)
    }
  }
  // Bytes a clone costs on a network: the client asks raw chunks from a loopback server (compressing costs
  // more time than the bytes there), so one more clone, not timed, asks zstd as it would from a remote one.
  let zstdCloneBytes = Number.NaN
  if (!pushesOnly) {
    const dest = path.join(tmp, "grove-clone-zstd")
    const since = groveProxy.mark()
    const cloned = await grove(["clone", "bench1/tree", dest, "--branch", firstBranch, "--remote", groveProxy.url, "--json"], firstKey, tmp, { GROVE_CHUNK_COMPRESSION: "on" })
    zstdCloneBytes = sum(since(), (x) => x.responseBytes)
    log(`grove clone with zstd asked (as from a remote server): ${fmtMs(cloned.ms)}, ${fmtBytes(zstdCloneBytes)} received`)
    const problems = compareTree(dest, manifest.entries)
    if (problems.length > 0) throw new Error(`the zstd grove clone differs from the tree:\n${problems.join("\n")}`)
    fs.rmSync(dest, { recursive: true, force: true })
  }

  // The same push from a packed repository (after `git repack`, not timed): git reuses the packed deltas.
  const gitPackedPush: Array<number> = []
  if (PACKED && !pushesOnly) {
    const repacked = await git(["repack", "-a", "-d", "-q"], { env: srcEnv })
    for (let i = 1; i <= gitPush.length; i++) {
      const bare = path.join(projectRoot, `p${i}.git`)
      await git(["init", "-q", "--bare", bare])
      await git(["config", "http.receivepack", "true"], { cwd: bare })
      const pushed = await git(["push", "-q", `${gitProxy.url}/p${i}.git`, "main:main"], { env: srcEnv })
      gitPackedPush.push(pushed.ms)
    }
    log(`git repack ${fmtMs(repacked.ms)}; git push from the packed repository: ${gitPackedPush.map(fmtMs).join(", ")}`)
  }

  // ---- small changes (git in its first clone, grove in its last checkout) -----
  const groveWork = async (label: string, edit: () => void, commitFirst: boolean) => {
    edit()
    const commit = commitFirst ? await grove(["commit", "--json"], key, checkout) : undefined
    const since = groveProxy.mark()
    const pushed = await grove(["push", "--json"], key, checkout)
    const exchanges = since()
    const detail = phases(label, pushed, exchanges, `bench${grovePush.length}/tree`)
    return { ms: pushed.ms, cpuMs: pushed.cpuMs, commitMs: commit?.ms ?? 0, bytes: sum(exchanges, (x) => x.requestBytes), chunks: sum(exchanges, (x) => x.chunks), json: pushed.json, detail }
  }
  const gitWorkPush = async (edit: () => void, commitFirst: boolean) => {
    edit()
    if (commitFirst) await git(["commit", "-q", "-a", "-m", "change"], { cwd: gitWork })
    const since = gitProxy.mark()
    const pushed = await git(["push", "-q", "origin", "main"], { cwd: gitWork })
    return { ms: pushed.ms, cpuMs: pushed.cpuMs, bytes: sum(since(), (x) => x.requestBytes) }
  }
  // CPU: of the client process (git: its children too, as for every git row).
  const noop = { git: [] as Array<number>, grove: [] as Array<number>, gitCpu: [] as Array<number>, groveCpu: [] as Array<number>, detail: "" }
  for (let i = 0; i < SMALL_RUNS; i++) {
    const g1 = await gitWorkPush(() => {}, false)
    noop.git.push(g1.ms)
    noop.gitCpu.push(g1.cpuMs)
    const g = await groveWork(`no-op push #${i + 1}`, () => {}, false)
    noop.grove.push(g.ms)
    noop.groveCpu.push(g.cpuMs)
    noop.detail = g.detail
  }
  log(`no-op push: git ${noop.git.map(fmtMs).join(", ")}; grove ${noop.grove.map(fmtMs).join(", ")}`)

  const oneFile = {
    git: [] as Array<number>,
    grove: [] as Array<number>,
    gitCpu: [] as Array<number>,
    groveCpu: [] as Array<number>,
    gitBytes: 0,
    groveBytes: 0,
    commit: [] as Array<number>,
    detail: ""
  }
  for (let i = 0; i < SMALL_RUNS; i++) {
    const rel = manifest.smallFiles[i % manifest.smallFiles.length]!
    const line = `// edited by the benchmark, round ${i + 1}\n`
    const g1 = await gitWorkPush(() => fs.appendFileSync(path.join(gitWork, rel), line), true)
    const g2 = await groveWork(`one-file push #${i + 1}`, () => fs.appendFileSync(path.join(checkout, rel), line), true)
    oneFile.git.push(g1.ms)
    oneFile.grove.push(g2.ms)
    oneFile.gitCpu.push(g1.cpuMs)
    oneFile.groveCpu.push(g2.cpuMs)
    oneFile.commit.push(g2.commitMs)
    oneFile.gitBytes = g1.bytes
    oneFile.groveBytes = g2.bytes
    oneFile.detail = g2.detail
  }
  log(`one-file push: git ${oneFile.git.map(fmtMs).join(", ")}; grove ${oneFile.grove.map(fmtMs).join(", ")} (grove commit before: ${oneFile.commit.map(fmtMs).join(", ")})`)

  const prepend = (file: string) => {
    const data = fs.readFileSync(file)
    fs.writeFileSync(file, Buffer.concat([Buffer.from([0x42]), data]))
  }
  const gitInsert = await gitWorkPush(() => prepend(path.join(gitWork, manifest.bigFile)), true)
  const groveInsert = await groveWork("one-byte insert push", () => prepend(path.join(checkout, manifest.bigFile)), true)
  log(`one-byte insert: git ${fmtMs(gitInsert.ms)} ${fmtBytes(gitInsert.bytes)}; grove ${fmtMs(groveInsert.ms)} ${fmtBytes(groveInsert.bytes)}, ${groveInsert.chunks} chunk(s) through the proxy, push says ${JSON.stringify(groveInsert.json)}`)

  // ---- report ----------------------------------------------------------------
  const allRows: Array<Row> = [
    { op: `push (full tree, fresh repo, median of ${grovePush.length})`, git: median(gitPush), grove: median(grovePush), ratioTarget: 1.0, note: `sent: git ${fmtBytes(median(gitPushBytes))}, grove ${fmtBytes(median(grovePushBytes))}` },
    { op: `  same, git pushing from a packed repo`, git: median(gitPackedPush), grove: median(grovePush), ratioTarget: 1.0, note: "" },
    { op: `clone (--branch, median of ${groveClone.length})`, git: median(gitClone), grove: median(groveClone), ratioTarget: 1.0, note: `received: git ${fmtBytes(median(gitCloneBytes))}, grove ${fmtBytes(median(groveCloneBytes))}` },
    { op: `no-op push (median of ${SMALL_RUNS})`, git: median(noop.git), grove: median(noop.grove), limitMs: 100, note: `CPU: git ${fmtMs(median(noop.gitCpu))}, grove client ${fmtMs(median(noop.groveCpu))}` },
    {
      op: `one-file change push (median of ${SMALL_RUNS})`,
      git: median(oneFile.git),
      grove: median(oneFile.grove),
      limitMs: 300,
      note: `sent: git ${fmtBytes(oneFile.gitBytes)}, grove ${fmtBytes(oneFile.groveBytes)}; CPU: git ${fmtMs(median(oneFile.gitCpu))}, grove client ${
        fmtMs(median(oneFile.groveCpu))
      }; grove commit before it ${fmtMs(median(oneFile.commit))}`
    },
    { op: "one-byte insert @ 50 MiB file, push", git: gitInsert.ms, grove: groveInsert.ms, note: `sent: git ${fmtBytes(gitInsert.bytes)}, grove ${fmtBytes(groveInsert.bytes)}; grove commit before it ${fmtMs(groveInsert.commitMs)}` }
  ]
  // Without the clone rounds, their rows and check would only show empty medians.
  const rows = pushesOnly ? allRows.filter((row) => !row.op.includes("clone") && !row.op.includes("packed")) : allRows
  const insertChunks = groveInsert.chunks
  const rss = Math.max(...rssGrowth)
  const report = {
    title: `Content benchmark: ${manifest.entries.length} files, ${fmtBytes(manifest.totalBytes)} (incl. ${fmtBytes(manifest.spec.bigBytes)} incompressible), git ${(await git(["--version"])).stdout.trim()}, Node ${process.version}, ${os.cpus().length} cores`,
    rows,
    checks: [
      { what: "chunks uploaded for the one-byte insert (frames in chunks/batch + PUT chunks/{hash})", value: `${insertChunks} (push reports ${String(groveInsert.json["uploaded_chunks"])})`, pass: insertChunks <= 2, target: "<= 2" },
      ...(pushesOnly ? [] : [{ what: "server RSS growth during clone (max over runs)", value: fmtBytes(rss), pass: rss < 64 * MIB, target: "< 64 MiB" }])
    ],
    notes: [
      `grove CLI start-up alone (grove --help): ${fmtMs(startupMs)}`,
      `git add ${fmtMs(added.ms)} + git commit ${fmtMs(committed.ms)} are excluded from git push; grove commit is excluded from grove push`,
      `CPU (medians): git push ${fmtMs(median(gitPushCpu))} and git clone ${fmtMs(median(gitCloneCpu))} (git client + http-backend together); ` +
        `grove push client ${fmtMs(median(grovePushCpu.map((c) => c.client)))} + server ${fmtMs(median(grovePushCpu.map((c) => c.server)))}, ` +
        `grove clone client ${fmtMs(median(groveCloneCpu.map((c) => c.client)))} + server ${fmtMs(median(groveCloneCpu.map((c) => c.server)))}`,
      `server RSS: ${fmtBytes(rssAtStart)} right after start, ${rssBeforeClone.map(fmtBytes).join(" / ")} before the clones, ` +
        `${rssRightAfterClone.map(fmtBytes).join(" / ")} right after them, ${rssAfterClone.map(fmtBytes).join(" / ")} ${SETTLED_MS / 1000} s after`,
      `load average (1 min): ${loadAtStart.toFixed(2)} at the start, ${os.loadavg()[0]!.toFixed(2)} at the end (the machine is shared: other work skews timings)`,
      `both tools go through the same counting proxy on 127.0.0.1; total run ${fmtMs(performance.now() - began)}`
    ],
    details: [...pushPhases.slice(0, 1), ...clonePhases.slice(0, 1), noop.detail, oneFile.detail, groveInsert.detail]
  }
  await cleanupAll()
  return {
    report,
    files: manifest.entries.length,
    totalBytes: manifest.totalBytes,
    push: { git: median(gitPush), grove: median(grovePush), gitBytes: median(gitPushBytes), groveBytes: median(grovePushBytes), ratios: paired(grovePush, gitPush), byteRatios: paired(grovePushBytes, gitPushBytes) },
    clone: { git: median(gitClone), grove: median(groveClone), gitBytes: median(gitCloneBytes), groveBytes: median(groveCloneBytes), ratios: paired(groveClone, gitClone), zstdBytes: zstdCloneBytes },
    /** CPU in ms: git's client and http-backend together against grove's client and server together (load moves it less than time). */
    cpu: {
      push: { git: median(gitPushCpu), grove: median(grovePushCpu.map(both)), ratios: paired(grovePushCpu.map(both), gitPushCpu) },
      clone: { git: median(gitCloneCpu), grove: median(groveCloneCpu.map(both)), ratios: paired(groveCloneCpu.map(both), gitCloneCpu) }
    },
    noop: { git: median(noop.git), grove: median(noop.grove), ratios: paired(noop.grove, noop.git) },
    oneFile: { git: median(oneFile.git), grove: median(oneFile.grove), ratios: paired(oneFile.grove, oneFile.git) },
    /** Server RSS in bytes around the clones (medians): before, the highest sample during, after. */
    cloneRss: { before: median(rssBeforeClone), peak: median(rssPeakClone), after: median(rssAfterClone), rightAfter: median(rssRightAfterClone) }
  }
}

export type ContentResult = Awaited<ReturnType<typeof measureContent>>

if (import.meta.main) {
  try {
    const base = process.argv.includes("--small") ? SMALL_SPEC : FULL_SPEC
    // Another tree size (e.g. `--files 100000 --mib 400`): generated once and cached like the others.
    const spec = { ...base, files: Number(argValue("files") ?? base.files), totalBytes: Number(argValue("mib") ?? base.totalBytes / MIB) * MIB }
    const pushesOnly = process.argv.includes("--pushes-only")
    printReport((await measureContent({ spec, runs: Number(argValue("runs") ?? 3), budgetMs: Number(argValue("budget-s") ?? 540) * 1000, pushesOnly, clonePairs: Number(argValue("clone-pairs") ?? 0) })).report)
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error))
    process.exitCode = 1
  } finally {
    await cleanupAll()
  }
}
