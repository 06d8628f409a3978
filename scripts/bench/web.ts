/**
 * Benchmark: the web pages against `GET /api/{owner}/{name}` in the same run, on an embedded server.
 *
 * - Server time: time to first byte and to the last byte of each page, measured from a loopback client
 *   (sequential requests after warm-up, the session cookie of a signed-in user; p50 and p95), for the
 *   repository page, a 2,000-line file page, a 200-file branch diff and an organization's overview
 *   (its repositories, storage and site), and the JSON read as baseline.
 * - Full render: Chromium (Debian's, through playwright-core), a fresh browser context per navigation
 *   (cold cache), until the load event: median.
 * - Page weight on a cold cache: the bytes of the HTML, CSS and JS as sent compressed, and the requests.
 * - CI: a finished run's page (a step that logged 1,500 coloured lines), and a live log line's delay from the
 *   step printing it to the run page's server-sent event arriving (the browser's stream, by its cookie).
 *
 *   npm run bench:web [-- --requests 40]
 * Goals (issue 25): repository page < 50 ms server p50; <= 30 KiB compressed and <= 2 requests cold.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import { chromium } from "playwright-core"
import { chromiumPath } from "../../test/support/browser.ts"
import { LIVE_WORKFLOW, liveWorkdir, printedAt, releaseStep } from "../../test/support/ciLive.ts"
import { buildCommit, pushBody } from "../../test/support/content.ts"
import { startServer } from "../../test/support/GroveServer.ts"
import { numberArg } from "./load.ts"

const REQUESTS = numberArg("--requests", 40)
// One kept-alive connection, as a browser reuses its connection.
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
const WARMUP = 5
const PASSWORD = "bench-password-1"

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

/**
 * One request (node:http: the body as sent, never decompressed): ms to the response head, ms to the
 * last body byte, the body's bytes on the wire, and its text when it was sent uncompressed.
 */
const timed = (url: string, headers: Record<string, string>) =>
  new Promise<{ head: number; full: number; bytes: number; text: string | undefined }>((resolve, reject) => {
    const start = performance.now()
    http.get(url, { headers, agent }, (response) => {
      const head = performance.now() - start
      const parts: Array<Buffer> = []
      response.on("data", (part: Buffer) => parts.push(part))
      response.on("end", () => {
        if (response.statusCode !== 200) return reject(new Error(`${url}: ${response.statusCode}`))
        const body = Buffer.concat(parts)
        resolve({ head, full: performance.now() - start, bytes: body.length, text: response.headers["content-encoding"] === undefined ? body.toString("utf8") : undefined })
      })
      response.on("error", reject)
    }).on("error", reject)
  })

const series = async (url: string, headers: Record<string, string>) => {
  for (let i = 0; i < WARMUP; i++) await timed(url, headers)
  const heads: Array<number> = []
  const fulls: Array<number> = []
  for (let i = 0; i < REQUESTS; i++) {
    const sample = await timed(url, headers)
    heads.push(sample.head)
    fulls.push(sample.full)
  }
  return { headP50: quantile(heads, 0.5), headP95: quantile(heads, 0.95), fullP50: quantile(fulls, 0.5) }
}

/** The bytes a cold browser fetches for a page (HTML gzip as served, its stylesheet and script as served) and how many requests. */
const weight = async (base: string, path: string, cookie: string) => {
  const html = await timed(`${base}${path}`, { cookie, "accept-encoding": "gzip, deflate, br, zstd" })
  const plain = (await timed(`${base}${path}`, { cookie })).text ?? ""
  const assets = [...plain.matchAll(/<(?:link rel="stylesheet" href|script src)="([^"]+)"/g)].map((m) => m[1]!)
  let bytes = html.bytes
  for (const asset of assets) bytes += (await timed(`${base}${asset}`, { "accept-encoding": "gzip, deflate, br, zstd" })).bytes
  return { bytes, requests: 1 + assets.length, htmlBytes: html.bytes }
}

/** `log` prints 1,500 coloured lines; `live` waits for a marker file in its checkout, then prints its clock (test/support/ciLive.ts). */
const WORKFLOWS = {
  ".oak/workflows/log.yml": ["on: [manual]", "jobs:", "  log:", "    steps:", "      - run: for i in $(seq 1 1500); do printf '\\033[32mline %s\\033[0m of the log\\n' $i; done"].join("\n"),
  ".oak/workflows/live.yml": LIVE_WORKFLOW
}
const LIVE_RUNS = 5

const startRun = async (api: (path: string, body: unknown) => Promise<Response>, workflow: string) => {
  const reply = await api("/bench/web/ci/runs", { workflow, branch: "main" })
  if (reply.status !== 201) throw new Error(`run not started: ${reply.status} ${await reply.text()}`)
  return ((await reply.json()) as { run_ids: Array<number> }).run_ids[0]!
}

/** Polls the API's run (with logs) until `done` answers something. */
const pollRun = async <T>(base: string, key: string, id: number, done: (run: any) => T | undefined): Promise<T> => {
  for (let i = 0; i < 1200; i++) {
    const run = await (await fetch(`${base}/api/bench/web/ci/runs/${id}`, { headers: { authorization: `Bearer ${key}` } })).json()
    const value = done(run)
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`CI run ${id} did not get there in 2 minutes`)
}

const completed = (base: string, key: string, id: number) => pollRun(base, key, id, (run) => (run.status === "completed" ? true : undefined))

/**
 * One live run: the run page's event stream (the browser's, by its session cookie) is open when the bench
 * lets the step print its clock; the delay is from that clock to the event's arrival here.
 */
const liveLineDelay = async (base: string, key: string, cookie: string, id: number) => {
  const workdir = await liveWorkdir(async () => (await fetch(`${base}/api/bench/web/ci/runs/${id}`, { headers: { authorization: `Bearer ${key}` } })).json())
  const response = await fetch(`${base}/bench/web/ci/runs/${id}/events`, { headers: { cookie } })
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  releaseStep(workdir)
  let seen = ""
  for (;;) {
    const { value, done } = await reader.read()
    if (done) throw new Error(`run ${id}'s events ended without the line`)
    seen += value
    const printed = printedAt(seen)
    if (!Number.isNaN(printed)) {
      const delay = Date.now() - printed
      await reader.cancel()
      return delay
    }
  }
}

const main = async () => {
  const server = await startServer()
  try {
    const key = await server.createUser("bench", { password: PASSWORD })
    const api = (path: string, body: unknown) =>
      fetch(`${server.url}/api${path}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) })
    if ((await api("/repos", { name: "web", is_public: true })).status !== 201) throw new Error("repository not created")
    // main: a README, a 2,000-line file and 200 small files; branch `wide` changes one line in each of the 200.
    const small = (i: number, variant: string) => Array.from({ length: 30 }, (_, l) => l === 15 ? `export const value${i} = "${variant}"\n` : `// line ${l} of file ${i}\n`).join("")
    const big = Array.from({ length: 2000 }, (_, l) => `export function f${l}(x: number): number { return x * ${l} + ${l % 7} } // ${"x".repeat(l % 40)}\n`).join("")
    const files: Record<string, string> = { "README.md": "# Bench\n\nA repository for `npm run bench:web`.\n", "src/big.ts": big, ...WORKFLOWS }
    for (let i = 0; i < 200; i++) files[`many/file${String(i).padStart(3, "0")}.ts`] = small(i, "main")
    const setup = buildCommit({ branch: "setup", files, parentHash: null, parentSnapshot: new Map() })
    if ((await api("/bench/web/push", pushBody({ branch: "setup", commits: [setup], description: "Bench files" }))).status !== 200) throw new Error("push failed")
    const merged = await (await api("/bench/web/branches/setup/merge", {})).json() as { commit_hash: string }
    const changed = { ...files }
    for (let i = 0; i < 200; i++) changed[`many/file${String(i).padStart(3, "0")}.ts`] = small(i, "branch")
    const wide = buildCommit({ branch: "wide", files: changed, parentHash: merged.commit_hash, parentSnapshot: setup.snapshot })
    if ((await api("/bench/web/push", pushBody({ branch: "wide", commits: [wide], description: "Change 200 files" }))).status !== 200) throw new Error("push failed")

    // A signed-in browser's session cookie.
    const signin = await fetch(`${server.url}/-/signin`)
    const csrfCookie = /grove_csrf=([^;]+)/.exec(signin.headers.get("set-cookie") ?? "")![1]!
    const csrf = /name="csrf" value="([^"]+)"/.exec(await signin.text())![1]!
    const signedIn = await fetch(`${server.url}/-/signin`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie: `grove_csrf=${csrfCookie}` },
      body: new URLSearchParams({ csrf, username: "bench", password: PASSWORD, next: "/" }).toString()
    })
    const session = /grove_session=([^;]+)/.exec(signedIn.headers.get("set-cookie") ?? "")
    if (session === null) throw new Error(`sign-in failed: ${signedIn.status}`)
    const cookie = `grove_session=${session[1]}`

    // A finished CI run whose step logged 1,500 coloured lines (the page shows the last 1,000).
    const logRun = await startRun(api, "log")
    await completed(server.url, key, logRun)

    const targets = [
      ["GET /api/bench/web (JSON, baseline)", "/api/bench/web", { authorization: `Bearer ${key}` }],
      ["repository page", "/bench/web", { cookie, "accept-encoding": "gzip" }],
      ["2,000-line file page", "/bench/web/blob/main/src/big.ts", { cookie, "accept-encoding": "gzip" }],
      ["200-file branch diff", "/bench/web/branches/wide", { cookie, "accept-encoding": "gzip" }],
      ["organization overview", "/-/orgs/bench", { cookie, "accept-encoding": "gzip" }],
      ["CI run page (1,500-line log)", `/bench/web/ci/runs/${logRun}`, { cookie, "accept-encoding": "gzip" }]
    ] as const
    const rows: Array<string> = []
    let baseline = 0
    for (const [label, path, headers] of targets) {
      const s = await series(`${server.url}${path}`, headers)
      if (baseline === 0) baseline = s.headP50
      const w = path.startsWith("/api") ? undefined : await weight(server.url, path, cookie)
      rows.push(`${label.padEnd(36)} TTFB p50 ${s.headP50.toFixed(1).padStart(7)} ms  p95 ${s.headP95.toFixed(1).padStart(7)} ms  last byte p50 ${s.fullP50.toFixed(1).padStart(7)} ms  ${(s.headP50 / baseline).toFixed(1).padStart(5)}x the JSON read${
        w === undefined ? "" : `  cold: ${(w.bytes / 1024).toFixed(1)} KiB compressed (HTML ${(w.htmlBytes / 1024).toFixed(1)} KiB), ${w.requests} request(s)`
      }`)
    }
    let renders: Array<string> = []
    if (chromiumPath !== undefined && fs.existsSync(chromiumPath)) {
      const browser = await chromium.launch({ executablePath: chromiumPath, headless: true })
      try {
        renders = []
        for (const [label, path] of targets) {
          const times: Array<number> = []
          for (let i = 0; i < 7; i++) {
            const context = await browser.newContext()
            if (!path.startsWith("/api")) await context.addCookies([{ name: "grove_session", value: session[1]!, url: server.url }])
            else await context.setExtraHTTPHeaders({ authorization: `Bearer ${key}` })
            const page = await context.newPage()
            const start = performance.now()
            await page.goto(`${server.url}${path}`, { waitUntil: "load" })
            times.push(performance.now() - start)
            await context.close()
          }
          renders.push(`${label.padEnd(36)} full render (cold cache, to the load event) median ${quantile(times, 0.5).toFixed(0)} ms`)
        }
      } finally {
        await browser.close()
      }
    } else renders.push("full render: skipped (no Chromium; bash scripts/setup/system-deps.sh installs it)")
    const delays: Array<number> = []
    for (let i = 0; i < LIVE_RUNS; i++) delays.push(await liveLineDelay(server.url, key, cookie, await startRun(api, "live")))
    console.log(`web pages, ${REQUESTS} sequential requests each after ${WARMUP} warm-up, loopback, embedded server`)
    for (const row of [...rows, ...renders]) console.log(row)
    console.log(`${"CI live log line".padEnd(36)} step prints -> the run page's event arrives: median ${quantile(delays, 0.5).toFixed(0)} ms, max ${Math.max(...delays).toFixed(0)} ms (${LIVE_RUNS} runs)`)
    console.log("goals: repository page < 50 ms server p50; <= 30 KiB compressed and <= 2 requests cold; a live log line within 1 s")
  } finally {
    agent.destroy()
    await server.stop()
  }
}

await main()
