/**
 * The small push (packages/cli/src/SmallPush.ts) answers a one-file push before the client loads, and sends what the
 * full push sends: through a proxy that records every request, the same checkout pushed both ways makes the same
 * requests (routes, headers but the Idempotency-Key's value and the full client's trace context, bodies byte for
 * byte), prints the same answer and leaves the same state. A push it does not take (a refused one) goes to the full command, which reports it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { at, builtinsOf, grove, type GroveOptions, json, ok, REPORT_BUILTINS, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

interface Recorded {
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Buffer
}

let server: GroveServer
let alice: GroveOptions
let proxy: http.Server
let proxyUrl: string
const recorded: Array<Recorded> = []
/** The next request whose URL matches is held unanswered (a hung server). */
let hangNext: RegExp | undefined

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
  const target = new URL(server.url)
  proxy = http.createServer((request, response) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => {
      const body = Buffer.concat(parts)
      recorded.push({ method: request.method!, url: request.url!, headers: { ...request.headers }, body })
      if (hangNext?.test(request.url!) === true) {
        hangNext = undefined
        return
      }
      const forward = http.request({ host: target.hostname, port: target.port, method: request.method, path: request.url, headers: request.headers }, (answer) => {
        response.writeHead(answer.statusCode!, answer.headers)
        answer.on("error", () => response.destroy())
        answer.pipe(response)
      })
      // An upstream socket cut (a client that gave up, the server stopping first) ends this answer, not the run.
      forward.on("error", () => response.destroy())
      forward.end(body)
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve))
  proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`
}, 300_000)

afterAll(async () => {
  proxy.closeAllConnections()
  await new Promise((resolve) => proxy.close(resolve))
  await stopSuiteServers()
})

/** Reports at exit whether the client (the bundle's grove.mjs or the sources' main.ts) was loaded, and the bundle ran. */
const REPORT_CLIENT = `data:text/javascript,${
  encodeURIComponent(`
import { registerHooks } from "node:module"
let client = false
let bundle = false
registerHooks({ resolve(specifier, context, next) { if (/grove\\.mjs$|src\\/main\\.ts$/.test(specifier)) client = true; if (/noop-push\\.mjs$/.test(specifier)) bundle = true; return next(specifier, context) } })
process.on("exit", () => process.stderr.write("client loaded=" + client + " bundle=" + bundle + "\\n"))
`)
}`

/** `grove push --json` in `dir`; `full` sends it through the full command (a crash point no command has). */
const push = async (options: GroveOptions, dir: string, full: boolean) => {
  const from = recorded.length
  const run = await grove(["push", "--json"], {
    ...at(options, dir),
    env: {
      ...options.env,
      NODE_OPTIONS: `--import ${REPORT_CLIENT} --import ${REPORT_BUILTINS}`,
      ...(full ? { GROVE_TEST_CRASH_AT: "none" } : {})
    }
  })
  const [, client, bundle] = /^client loaded=(\w+) bundle=(\w+)$/m.exec(run.stderr) ?? []
  const builtins = bundle === "true" ? builtinsOf(run.stderr) : undefined
  return { run, client, builtins, stderr: run.stderr.replace(/^(client loaded|builtins)[ =].*\n/gm, ""), requests: recorded.slice(from) }
}

/**
 * A request as compared: the Idempotency-Key's value differs per send; host and connection are the proxy's. The typed
 * client's trace context (b3, traceparent: effect's HttpClient propagates its span, a random id per request) is the
 * one thing the small push does not send: no trace of the client's is running.
 */
const shape = (r: Recorded) => {
  const { b3: _b3, connection: _c, host: _h, "idempotency-key": key, traceparent: _t, ...headers } = r.headers
  return { method: r.method, url: r.url, headers, idempotent: key !== undefined, body: r.body.toString("base64") }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 2_100))

/** Two copies of a checkout whose branch has one unpushed commit editing one small file (in a directory of `files`). */
const twoCheckouts = async (name: string, files = 10) => {
  const options: GroveOptions = { ...alice, env: { ...alice.env!, GROVE_REMOTE: proxyUrl } }
  const work = tempDir(name)
  await ok(["init", "--name", name], at(options, work))
  for (let i = 0; i < 3 * files; i++) {
    fs.mkdirSync(path.join(work, `d${i % 3}/e`), { recursive: true })
    fs.writeFileSync(path.join(work, `d${i % 3}/e/file-${i}.txt`), `file ${i}\n`)
  }
  await ok(["push"], at(options, work))
  fs.appendFileSync(path.join(work, "d1/e/file-4.txt"), "edited\n")
  await ok(["commit"], at(options, work))
  const copy = tempDir(`${name}-copy`)
  // Not the push's trash of kept blobs, which a process of its own is removing meanwhile (ENOENT mid-copy).
  fs.cpSync(work, copy, { recursive: true, preserveTimestamps: true, filter: (from) => !/\/\.grove\/objects\/trash-[^/]*$/.test(from) })
  // A copy has new inodes and ctimes: its index is brought up to date once (status records them) before pushing,
  // once the directories have settled (TreeStatus SETTLE_MS: a directory changed just before a walk is read again).
  await settle()
  await ok(["status"], at(options, copy))
  await ok(["status"], at(options, work))
  return { options, work, copy }
}

describe("the small push", () => {
  it("sends the full push's requests byte for byte, without loading the client, and answers and records the same", async () => {
    // 10 files a directory: the push's JSON goes plain; 150: over 16 KiB, it goes zstd after a capabilities request.
    for (const [name, files] of [["sp", 10], ["sz", 150]] as const) {
      const { copy, options, work } = await twoCheckouts(name, files)
      const small = await push(options, work, false)
      expect({ code: small.run.code, stderr: small.stderr }).toEqual({ code: 0, stderr: "" })
      expect(small.client).toBe("false")
      // The bundle's small push loads neither node:crypto nor node:fs/promises (~8 ms of its CPU; local/Files.ts),
      // nor node:zlib (~2 ms) while nothing it sends or receives is compressed (core's Zlib.ts, HttpSend's decode).
      if (small.builtins !== undefined) {
        expect(small.builtins).toContain("http") // the hook saw the run
        const unwanted = ["crypto", "fs/promises", ...(name === "sp" ? ["zlib"] : [])]
        expect(small.builtins.filter((n) => unwanted.includes(n))).toEqual([])
      }
      const full = await push(options, copy, true)
      expect({ code: full.run.code, stderr: full.stderr }).toEqual({ code: 0, stderr: "" })
      expect(full.client).toBe("true")

      expect(json(small.run)).toMatchObject({ pushed_commits: 1, uploaded_chunks: 1, created_repository: false })
      expect(small.run.stdout).toBe(full.run.stdout)
      // The capabilities go while the blob uploads: the two come in either order.
      const byUrl = (requests: ReadonlyArray<Recorded>) => [...requests].sort((a, b) => a.url < b.url ? -1 : 1)
      const routes = (requests: ReadonlyArray<Recorded>) => byUrl(requests).map((r) => `${r.method} ${r.url.replace(`/api/alice/${name}/`, "")}`)
      expect(routes(small.requests)).toEqual(files === 10 ? ["POST chunks/batch", "POST push"] : ["POST chunks/batch", "POST push", "GET /api/capabilities"])
      expect(small.requests.at(-1)!.url).toMatch(/\/push$/)
      // The full push finds its commit landed (the small push sent it first) and stops there: the same requests.
      expect(routes(full.requests)).toEqual(routes(small.requests))
      expect(byUrl(small.requests).map(shape)).toEqual(byUrl(full.requests).map(shape))
      const sent = small.requests.at(-1)!
      expect(sent.headers["idempotency-key"]).toMatch(/^[0-9a-f-]{36}$/)
      expect(sent.headers["content-encoding"]).toBe(files === 10 ? undefined : "zstd")

      const state = (dir: string) => fs.readFileSync(path.join(dir, ".grove/state.json"), "utf8")
      expect(state(work)).toBe(state(copy))
      expect(JSON.parse(state(work)).branches[json(small.run).branch]).toMatchObject({ remote_head: json(small.run).head, unpushed: [] })
      expect(fs.existsSync(path.join(work, ".grove/objects/blobs"))).toBe(false) // the kept copy went, as with the full push
      expect(fs.existsSync(path.join(copy, ".grove/objects/blobs"))).toBe(false)
      // Nothing left to push either way.
      expect(json(await grove(["push", "--json"], at(options, work)))).toMatchObject({ pushed_commits: 0 })
    }
  }, 240_000)

  it("takes the token of a login session (~/.grove/credentials) as the full command does, and leaves an expired one to it", async () => {
    const { options, work } = await twoCheckouts("ss")
    expect(JSON.parse(fs.readFileSync(path.join(work, ".grove/config.json"), "utf8")).key).toBeUndefined()
    const { SERVICE_API_KEY: key, ...env } = options.env!
    const session = (expires_at?: string) => {
      fs.mkdirSync(path.join(options.home, ".grove"), { recursive: true, mode: 0o700 })
      const entry = { token: key, username: "alice", created_at: new Date().toISOString(), ...(expires_at === undefined ? {} : { expires_at }) }
      fs.writeFileSync(path.join(options.home, ".grove/credentials"), JSON.stringify({ [proxyUrl]: entry }), { mode: 0o600 })
    }
    session(new Date(Date.now() - 60_000).toISOString())
    const expired = await push({ ...options, env }, work, false)
    // No credential then: the full command sends none, and the server does not take the push.
    expect(expired.client).toBe("true")
    expect(expired.run.code).not.toBe(0)
    session()
    const pushed = await push({ ...options, env }, work, false)
    expect({ code: pushed.run.code, stderr: pushed.stderr, client: pushed.client }).toEqual({ code: 0, stderr: "", client: "false" })
    expect(json(pushed.run)).toMatchObject({ pushed_commits: 1 })
    expect(pushed.requests.map((r) => r.headers["authorization"])).toEqual([`Bearer ${key}`, `Bearer ${key}`])
  }, 180_000)

  it("leaves a refused push to the full command, which reports it as it always did", async () => {
    const { copy, options, work } = await twoCheckouts("sr")
    // Another push moves the branch first: the server refuses the next one on its expected head.
    fs.appendFileSync(path.join(copy, "d2/e/file-5.txt"), "other\n")
    await ok(["commit"], at(options, copy))
    await ok(["push"], at(options, copy))
    const refused = await push(options, work, false)
    expect(refused.client).toBe("true")
    expect(refused.run.code).toBe(1)
    expect(json(refused.run)).toMatchObject({ code: "remote_head_changed" })
    const routes = refused.requests.map((r) => r.url.replace(/^\/api\/alice\/sr\//, ""))
    // The small push's batch and push, then the full command's.
    expect(routes).toEqual(["chunks/batch", "push", "chunks/batch", "push"])
  }, 180_000)

  it("hands a server that does not answer over to the full command after its deadline, not after 300 s", async () => {
    const { options, work } = await twoCheckouts("sh")
    hangNext = /\/chunks\/batch$/
    // The old small push waited 300 s: the harness kills a run at 60 s, so its exit code fails this (no clock here).
    const pushed = await push({ ...options, env: { ...options.env!, GROVE_TEST_SMALL_PUSH_DEADLINE_MS: "1500" } }, work, false)
    expect({ code: pushed.run.code, client: pushed.client, stderr: pushed.stderr }).toEqual({ code: 0, client: "true", stderr: "" })
    expect(json(pushed.run)).toMatchObject({ pushed_commits: 1 })
    // The held batch, then the full command's batch and push.
    expect(pushed.requests.map((r) => r.url.replace(/^\/api\/alice\/sh\//, ""))).toEqual(["chunks/batch", "chunks/batch", "push"])
  }, 180_000)

  it("leaves a large blob to the full command before any request", async () => {
    const options: GroveOptions = { ...alice, env: { ...alice.env!, GROVE_REMOTE: proxyUrl } }
    const work = tempDir("sl")
    await ok(["init", "--name", "sl"], at(options, work))
    fs.writeFileSync(path.join(work, "a.txt"), "a\n")
    await ok(["push"], at(options, work))
    fs.writeFileSync(path.join(work, "big.bin"), Buffer.alloc(70 * 1024, 7))
    await ok(["commit"], at(options, work))
    await settle()
    await ok(["status"], at(options, work))
    const pushed = await push(options, work, false)
    expect({ code: pushed.run.code, client: pushed.client }).toEqual({ code: 0, client: "true" })
    expect(pushed.requests.map((r) => r.url.replace(/^\/api\/alice\/sl\//, ""))).toEqual(["chunks/check", "chunks/batch", "push"])
  }, 180_000)
})
