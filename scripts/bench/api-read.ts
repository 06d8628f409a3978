/**
 * Benchmark: `GET /api/{owner}/{name}` with a personal API key at concurrency
 * 64 against the embedded server, and the same load against a bare node:http
 * server answering the same JSON body, measured in the same run. Prints req/s,
 * p50, p99, the ratio (target >= 0.5x) and the server's idle RSS.
 *
 *   npm run bench:api-read [-- --duration 10 --connections 64]
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { startServer } from "../../test/support/GroveServer.ts"
import { line, load as loadOnce, numberArg } from "./load.ts"

const duration = numberArg("duration", 10)
const connections = numberArg("connections", 64)
const load = (url: string, headers: Record<string, string>) => loadOnce(url, headers, { connections, duration })

const rssOf = (pid: number): number => {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
  return kb / 1024
}

const startBare = (body: string) =>
  new Promise<{ url: string; stop: () => void }>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(import.meta.dirname, "bare-server.ts"), body], { stdio: ["ignore", "pipe", "inherit"] })
    child.stdout.on("data", (d: Buffer) => {
      const match = /listening on (\S+)/.exec(d.toString())
      if (match) resolve({ url: match[1]!, stop: () => child.kill("SIGTERM") })
    })
    child.on("error", reject)
  })

const main = async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-"))
  const server = await startServer({ dataDir })
  try {
    const key = await server.createUser("bench")
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const created = await fetch(`${server.url}/api/repos`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: "bench-repo", description: "benchmark repository" })
    })
    if (created.status !== 201) throw new Error(`create failed: ${created.status} ${await created.text()}`)
    const target = `${server.url}/api/bench/bench-repo`
    const sample = await fetch(target, { headers })
    const body = await sample.text()
    if (sample.status !== 200) throw new Error(`read failed: ${sample.status} ${body}`)
    await new Promise((r) => setTimeout(r, 1000))
    const idleRss = rssOf(server.process.pid!)

    const bare = await startBare(body)
    // Warm both up, then measure the baseline and Grove back to back.
    await load(bare.url, headers)
    const baseline = await load(bare.url, headers)
    bare.stop()
    await load(target, headers)
    const grove = await load(target, headers)
    const loadedRss = rssOf(server.process.pid!)

    console.log(`GET /api/{owner}/{name}, personal key, ${connections} connections, ${duration} s, embedded mode`)
    console.log(line("bare node:http", baseline))
    console.log(line("grove", grove))
    console.log(`ratio grove/bare: ${(grove.rps / baseline.rps).toFixed(2)}x (target >= 0.5x)`)
    console.log(`server RSS: idle ${idleRss.toFixed(1)} MiB, after load ${loadedRss.toFixed(1)} MiB`)
    if (grove.non2xx > 0 || grove.errors > 0) process.exitCode = 1
  } finally {
    await server.stop()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
