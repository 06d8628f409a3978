/**
 * Two grove clients, A/B: clone and push of the content benchmark's tree (5k files / 50 MiB by default) by the
 * bundled clients of two checkouts (say a worktree at an older commit and this one), against one server (the
 * first checkout's bundle), alternating in the same sitting. Prints wall time, client CPU (user + system, the
 * client and its children) and server CPU per operation, their medians, and B's over A's: client CPU is the
 * number to compare when the machine is busy (wall time swings with the load).
 *
 *   node scripts/bench/content/client-ab.ts --a /tmp/old-worktree --b . [--rounds 3] [--files 5000 --mib 50] [--tmpfs] [--clones-only]
 *     [--a-env NAME=VALUE] [--b-env NAME=VALUE]
 *
 * `--a-env`/`--b-env` set one environment variable for that side's client only (both sides may be one checkout:
 * `--b-env GROVE_STREAM_SOCKET=0` measures a switch).
 *
 * Each push is a new user's first push of the whole tree (a new user cannot see the others' chunks, so nothing
 * is skipped as already there). Clones stay on disk until the end: ext4 passes over inodes freed in the last
 * seconds to minutes when it allocates new ones (`recently_deleted`), and 5,000 files created right after
 * 5,000 were removed cost up to seconds of system time, whichever client runs. `--tmpfs` clones into /dev/shm,
 * which takes the file system's allocation out of the comparison. Both checkouts need their bundles built
 * (`node packages/cli/scripts/bundle.ts` and `node packages/server/scripts/bundle.ts` in each).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cleanupAll, cpuOf, onCleanup, run, startGuarded } from "./procs.ts"
import { fmtMs, median } from "./report.ts"
import { ensureTree, MIB, SMALL_SPEC } from "./tree.ts"

const arg = (name: string, fallback?: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1]! : fallback
}
const sides = { A: path.resolve(arg("a", ".")!), B: path.resolve(arg("b", ".")!) }
const rounds = Number(arg("rounds", "3"))
const spec = { ...SMALL_SPEC, files: Number(arg("files", "5000")), totalBytes: Number(arg("mib", "50")) * MIB }
const tmpfs = process.argv.includes("--tmpfs")
/** Only clones (after the one push that makes the repository). */
const clonesOnly = process.argv.includes("--clones-only")

const tree = ensureTree(spec, (line) => console.error(line))
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "grove-client-ab-"))
const cloneRoot = tmpfs ? fs.mkdtempSync("/dev/shm/grove-client-ab-") : tmp
onCleanup(() => fs.rmSync(tmp, { recursive: true, force: true }))
onCleanup(() => fs.rmSync(cloneRoot, { recursive: true, force: true }))
const env = { ...process.env, GROVE_BUNDLE: "1" }
const serverBin = path.join(sides.A, "packages/server/bin/grove-server.js")
const dataDir = path.join(tmp, "data")
const server = await startGuarded(process.execPath, [serverBin, "serve", "--port", "0", "--data-dir", dataDir], /listening on (http:\/\/\S+)/, env)
onCleanup(server.stop)
const url = server.match[1]!
const createUser = async (name: string) =>
  (await run(process.execPath, [serverBin, "user", "create", name, "--data-dir", dataDir])).stdout.trim().split("\n").at(-1)!
const sideEnv = (side: "a" | "b"): Record<string, string> => {
  const setting = arg(`${side}-env`)
  if (setting === undefined) return {}
  const at = setting.indexOf("=")
  if (at <= 0) throw new Error(`--${side}-env wants NAME=VALUE, got ${setting}`)
  return { [setting.slice(0, at)]: setting.slice(at + 1) }
}
const sideEnvs = { A: sideEnv("a"), B: sideEnv("b") }
const grove = (side: keyof typeof sides, args: ReadonlyArray<string>, key: string, cwd: string) =>
  run(process.execPath, [path.join(sides[side], "packages/cli/bin/grove.js"), ...args], {
    cwd,
    env: { ...env, ...sideEnvs[side], SERVICE_API_KEY: key, GROVE_REMOTE: url }
  })

type Sample = { wall: number; client: number; server: number; load: number }
const samples = new Map<string, Array<Sample>>()
const timed = async (what: string, side: keyof typeof sides, args: ReadonlyArray<string>, key: string, cwd: string) => {
  const before = cpuOf(server.pid)
  const ran = await grove(side, args, key, cwd)
  const sample = { wall: ran.ms, client: ran.cpuMs, server: cpuOf(server.pid) - before, load: os.loadavg()[0]! }
  const list = samples.get(`${what} ${side}`) ?? []
  list.push(sample)
  samples.set(`${what} ${side}`, list)
  console.error(`${what} ${side}: ${fmtMs(sample.wall)}, client CPU ${fmtMs(sample.client)}, server CPU ${fmtMs(sample.server)}, load ${sample.load.toFixed(1)}`)
  return ran
}

// A push of each user's own repository; the first one also gives the repository every clone reads.
let n = 0
const push = async (side: keyof typeof sides) => {
  const name = `ab${++n}`
  const key = await createUser(name)
  const work = path.join(tmp, `push-${n}`)
  await run("cp", ["-a", `${tree.dir}/.`, work])
  const init = JSON.parse((await grove(side, ["init", "--owner", name, "--name", "tree", "--remote", url, "--json"], key, work)).stdout)
  await grove(side, ["commit", "--json"], key, work)
  await timed("push", side, ["push", "--json"], key, work)
  return { key, repo: `${name}/tree`, branch: String(init.branch) }
}
const source = await push("A")
for (let round = 0; round < rounds; round++) {
  const order: Array<keyof typeof sides> = round % 2 === 0 ? ["A", "B"] : ["B", "A"]
  for (const side of order) {
    const dest = path.join(cloneRoot, `clone-${side}-${round}`)
    await timed("clone", side, ["clone", source.repo, dest, "--branch", source.branch, "--remote", url, "--json"], source.key, tmp)
  }
  if (!clonesOnly) for (const side of order) await push(side)
}

console.log(`A = ${sides.A}\nB = ${sides.B}\n${rounds} round(s), ${spec.files} files / ${spec.totalBytes / MIB} MiB, clones on ${tmpfs ? "tmpfs" : "the temp directory's file system"}`)
for (const what of clonesOnly ? ["clone"] : ["clone", "push"]) {
  const a = samples.get(`${what} A`)!.slice(what === "push" ? 1 : 0) // the source push is not paired
  const b = samples.get(`${what} B`)!
  const med = (xs: Array<Sample>, f: (s: Sample) => number) => median(xs.map(f))
  for (const [side, xs] of [["A", a], ["B", b]] as const) {
    console.log(`${what} ${side}: wall ${fmtMs(med(xs, (s) => s.wall))}, client CPU ${fmtMs(med(xs, (s) => s.client))} [${xs.map((s) => fmtMs(s.client)).join(", ")}], server CPU ${fmtMs(med(xs, (s) => s.server))}, load ${xs.map((s) => s.load.toFixed(1)).join("/")}`)
  }
  console.log(`${what} B/A (medians): wall ${(med(b, (s) => s.wall) / med(a, (s) => s.wall)).toFixed(2)}x, client CPU ${(med(b, (s) => s.client) / med(a, (s) => s.client)).toFixed(2)}x`)
}
await cleanupAll()
