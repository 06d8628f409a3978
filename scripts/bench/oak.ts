/**
 * Benchmark: the public Oak client against Grove, beside Grove's own client and git, in the same run:
 *   - a clone of 5,005 small files plus one 110 MiB file: `oak clone` vs `grove clone` vs `git clone`
 *     (smart HTTP, `git http-backend`): wall time, bytes received, client peak RSS; and the same
 *     `oak clone` from the client's own reference server (`oak serve`), the client's floor here;
 *   - a later push of a new 200 MiB file: `oak push` (staged_v1 with a blob proof) vs `grove push` (each its own
 *     bytes: the same file pushed twice by one user would be deduplicated the second time).
 * Every client talks through the same counting proxy. Needs the `oak` binary (scripts/setup/oak.sh).
 *
 *   npm run bench:oak [-- --files 5005 --big-mib 110 --push-mib 200]
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { makeOak, noise, oakPath } from "../../test/support/Oak.ts"
import { startGitHttp } from "./content/gitHttp.ts"
import { cleanupAll, onCleanup, run, startGuarded } from "./content/procs.ts"
import { startProxy } from "./content/proxy.ts"
import { fmtBytes, fmtMs, phases } from "./content/report.ts"
import { numberArg } from "./load.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")
const SERVER_BIN = path.join(ROOT, "packages/server/bin/grove-server.js")
const CLI_BIN = path.join(ROOT, "packages/cli/bin/grove.js")
const FILES = numberArg("files", 5005)
const BIG = numberArg("big-mib", 110) * 1024 * 1024
const PUSH = numberArg("push-mib", 200) * 1024 * 1024
const began = performance.now()
const log = (line: string) => console.error(`[${((performance.now() - began) / 1000).toFixed(1).padStart(6)} s] ${line}`)

/** Wall time and peak RSS (GNU time's %M, KiB) of one command. */
const timed = async (command: string, args: ReadonlyArray<string>, options: { cwd: string; env: NodeJS.ProcessEnv }) => {
  const ran = await run("/usr/bin/time", ["-f", "%M", command, ...args], options)
  const rssKiB = Number(ran.stderr.trim().split("\n").at(-1))
  return { ...ran, rss: rssKiB * 1024 }
}

const writeTree = (dir: string) => {
  fs.mkdirSync(dir, { recursive: true })
  for (let i = 0; i < FILES; i++) {
    const sub = path.join(dir, `d${String(i % 50).padStart(2, "0")}`)
    fs.mkdirSync(sub, { recursive: true })
    fs.writeFileSync(path.join(sub, `f${i}.txt`), `file ${i}\n${"x".repeat(i % 300)}\n`)
  }
  fs.writeFileSync(path.join(dir, "big.bin"), noise(BIG, 110))
}

const main = async () => {
  if (oakPath === undefined) throw new Error("the oak binary is missing: bash scripts/setup/oak.sh")
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-oak-"))
  onCleanup(() => fs.rmSync(tmp, { recursive: true, force: true }))
  const dataDir = path.join(tmp, "data")
  const server = await startGuarded(process.execPath, [SERVER_BIN, "serve", "--port", "0", "--data-dir", dataDir], /listening on (http:\/\/\S+)/)
  onCleanup(server.stop)
  const proxy = await startProxy(server.match[1]!)
  onCleanup(proxy.close)
  const user = await run(process.execPath, [SERVER_BIN, "user", "create", "bench", "--data-dir", dataDir])
  const key = user.stdout.trim().split("\n").at(-1)!
  const home = path.join(tmp, "home")
  fs.mkdirSync(home)
  const oakEnv = { PATH: process.env["PATH"] ?? "", HOME: home, OAK_NO_UPDATE_CHECK: "1", OAK_API_KEY: key, OAK_AUTHOR: "bench", NO_COLOR: "1" }
  const oak = makeOak({ home: () => home, key: () => key, author: "bench" })
  const received = (since: () => ReadonlyArray<{ responseBytes: number }>) => since().reduce((n, x) => n + x.responseBytes, 0)
  const sent = (since: () => ReadonlyArray<{ requestBytes: number }>) => since().reduce((n, x) => n + x.requestBytes, 0)

  // The same tree three ways: an oak checkout, a grove checkout, a git repository.
  const oakWork = path.join(tmp, "oak-work")
  await oak.run(["init", "oak-work"], tmp)
  writeTree(oakWork)
  await oak.run(["commit"], oakWork)
  const first = await oak.run(["push", "-r", proxy.url, "--repo", "bench/oaktree", "--json"], oakWork)
  if (first.code !== 0) throw new Error(first.stderr)
  const branch = JSON.parse(first.stdout.trim().split("\n").at(-1)!).branch as string
  log(`oak tree pushed (${FILES} files + ${fmtBytes(BIG)}), branch ${branch}`)

  const groveWork = path.join(tmp, "grove-work")
  writeTree(groveWork)
  const groveEnv = { ...process.env, SERVICE_API_KEY: key, GROVE_REMOTE: proxy.url }
  const grove = (args: ReadonlyArray<string>, cwd: string) => run(process.execPath, [CLI_BIN, ...args], { cwd, env: groveEnv })
  const init = JSON.parse((await grove(["init", "--owner", "bench", "--name", "grovetree", "--remote", proxy.url, "--json"], groveWork)).stdout)
  await grove(["commit", "--json"], groveWork)
  await grove(["push", "--json"], groveWork)
  log("grove tree pushed")

  const gitRoot = path.join(tmp, "git-root")
  fs.mkdirSync(gitRoot)
  const gitConfig = path.join(tmp, "gitconfig")
  fs.writeFileSync(gitConfig, "[user]\n\tname = bench\n\temail = bench@example.com\n[init]\n\tdefaultBranch = main\n[gc]\n\tauto = 0\n")
  const gitEnv = { ...process.env, GIT_CONFIG_GLOBAL: gitConfig, GIT_CONFIG_NOSYSTEM: "1" }
  const gitWork = path.join(tmp, "git-work")
  writeTree(gitWork)
  await run("git", ["init", "-q"], { cwd: gitWork, env: gitEnv })
  await run("git", ["add", "-A"], { cwd: gitWork, env: gitEnv })
  await run("git", ["commit", "-q", "-m", "tree"], { cwd: gitWork, env: gitEnv })
  await run("git", ["clone", "-q", "--bare", gitWork, path.join(gitRoot, "tree.git")], { cwd: tmp, env: gitEnv })
  const gitHttp = await startGitHttp(gitRoot, gitEnv)
  onCleanup(gitHttp.close)
  const gitProxy = await startProxy(gitHttp.url)
  onCleanup(gitProxy.close)

  // The client's own reference server, for the client's floor on this machine.
  const oakServe = await startGuarded(oakPath, ["serve", "--dir", path.join(tmp, "oak-serve"), "--port", "0"], /listening on (http:\/\/\S+)/)
  onCleanup(oakServe.stop)
  const serveProxy = await startProxy(oakServe.match[1]!, { keepHost: true })
  onCleanup(serveProxy.close)
  const serveWork = path.join(tmp, "serve-work")
  await oak.run(["init", "serve-work"], tmp)
  writeTree(serveWork)
  await oak.run(["commit"], serveWork)
  const served = await oak.run(["push", "-r", serveProxy.url, "--repo", "bench/oaktree", "--json"], serveWork, { OAK_API_KEY: "" })
  if (served.code !== 0) throw new Error(served.stderr)
  const servedBranch = JSON.parse(served.stdout.trim().split("\n").at(-1)!).branch as string
  log("oak tree pushed to oak serve")

  // ---- clones ---------------------------------------------------------------
  const rows: Array<{ what: string; ms: number; bytes: number; rss: number }> = []
  for (let round = 1; round <= 2; round++) {
    let since = gitProxy.mark()
    const g = await timed("git", ["clone", "-q", `${gitProxy.url}/tree.git`, path.join(tmp, `git-clone-${round}`)], { cwd: tmp, env: gitEnv })
    rows.push({ what: `git clone #${round}`, ms: g.ms, bytes: received(since), rss: g.rss })
    since = proxy.mark()
    const gr = await timed(process.execPath, [CLI_BIN, "clone", "bench/grovetree", path.join(tmp, `grove-clone-${round}`), "--branch", String(init.branch), "--remote", proxy.url, "--json"], { cwd: tmp, env: groveEnv })
    rows.push({ what: `grove clone #${round}`, ms: gr.ms, bytes: received(since), rss: gr.rss })
    since = proxy.mark()
    const o = await timed(oakPath, ["clone", "-r", proxy.url, "bench/oaktree", path.join(tmp, `oak-clone-${round}`), "--branch", branch], { cwd: tmp, env: oakEnv })
    rows.push({ what: `oak clone #${round}`, ms: o.ms, bytes: received(since), rss: o.rss })
    log(phases(`oak clone #${round}`, o, since(), "bench/oaktree"))
    since = serveProxy.mark()
    const os_ = await timed(oakPath, ["clone", "-r", serveProxy.url, "bench/oaktree", path.join(tmp, `serve-clone-${round}`), "--branch", servedBranch], { cwd: tmp, env: { ...oakEnv, OAK_API_KEY: "" } })
    rows.push({ what: `oak clone from oak serve #${round}`, ms: os_.ms, bytes: received(since), rss: os_.rss })
    for (const r of rows.slice(-4)) log(`${r.what}: ${fmtMs(r.ms)}, ${fmtBytes(r.bytes)} received, client peak RSS ${fmtBytes(r.rss)}`)
  }

  // ---- a later push of a new large file ---------------------------------------
  // Different bytes for each: the same file pushed by the same user would be deduplicated for the second client.
  fs.writeFileSync(path.join(oakWork, "push.bin"), noise(PUSH, 201))
  fs.writeFileSync(path.join(groveWork, "push.bin"), noise(PUSH, 200))
  await oak.run(["commit"], oakWork)
  await grove(["commit", "--json"], groveWork)
  let since = proxy.mark()
  const gp = await timed(process.execPath, [CLI_BIN, "push", "--json"], { cwd: groveWork, env: groveEnv })
  const gpBytes = sent(since)
  since = proxy.mark()
  const op = await timed(oakPath, ["push", "--json"], { cwd: oakWork, env: { ...oakEnv, OAK_VERBOSE: "1" } })
  const opBytes = sent(since)
  if (!/push\/staged-v1/.test(op.stderr)) throw new Error(`oak push did not go staged:\n${op.stderr.slice(-2000)}`)
  log(`grove push ${fmtBytes(PUSH)}: ${fmtMs(gp.ms)}, ${fmtBytes(gpBytes)} sent, client peak RSS ${fmtBytes(gp.rss)}`)
  log(`oak push (staged_v1) ${fmtBytes(PUSH)}: ${fmtMs(op.ms)}, ${fmtBytes(opBytes)} sent, client peak RSS ${fmtBytes(op.rss)}`)

  const median = (what: string) => {
    const xs = rows.filter((r) => r.what.startsWith(what))
    return xs.reduce((best, r) => (r.ms < best.ms ? r : best))
  }
  const git = median("git clone")
  const groveClone = median("grove clone")
  const oakClone = median("oak clone #")
  const serveClone = median("oak clone from oak serve")
  console.log(`\nOak client vs grove vs git, same machine, same run (${FILES} files + ${fmtBytes(BIG)}; push ${fmtBytes(PUSH)}); best of 2 clones`)
  console.log("| operation | time | x git | x grove | received/sent | client peak RSS |")
  console.log("|---|---|---|---|---|---|")
  for (const [name, r] of [["git clone", git], ["grove clone", groveClone], ["oak clone", oakClone], ["oak clone from oak serve", serveClone]] as const) {
    console.log(`| ${name} | ${fmtMs(r.ms)} | ${(r.ms / git.ms).toFixed(2)} | ${(r.ms / groveClone.ms).toFixed(2)} | ${fmtBytes(r.bytes)} | ${fmtBytes(r.rss)} |`)
  }
  console.log(`| grove push ${fmtBytes(PUSH)} | ${fmtMs(gp.ms)} | | 1.00 | ${fmtBytes(gpBytes)} | ${fmtBytes(gp.rss)} |`)
  console.log(`| oak push ${fmtBytes(PUSH)} (staged) | ${fmtMs(op.ms)} | | ${(op.ms / gp.ms).toFixed(2)} | ${fmtBytes(opBytes)} | ${fmtBytes(op.rss)} |`)
}

main().then(cleanupAll, async (error) => {
  console.error(error)
  await cleanupAll()
  process.exit(1)
})
