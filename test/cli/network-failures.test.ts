/**
 * The real `grove` against servers that fail: one that accepts and never answers, one that never takes the connection,
 * answers cut short, reset, or not Grove's. Each ends with one clear line (never a stack) and the exit code the README
 * gives: 6 for the network, 1 for an answer the client cannot use; none waits for ever.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { at, grove, json, ok, spawnGrove, startSuiteServer, stopSuiteServers, tempDir } from "./harness.ts"

afterAll(stopSuiteServers)

/** An HTTP server answering with `answer`, counting requests by method; closed with its connections. */
const fakeServer = async (answer: (request: http.IncomingMessage, response: http.ServerResponse) => void) => {
  const seen: Array<string> = []
  const server = http.createServer((request, response) => {
    seen.push(`${request.method} ${request.url}`)
    answer(request, response)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

const run = (args: ReadonlyArray<string>, remote: string, env: Record<string, string> = {}) => {
  const home = tempDir("net")
  return grove([...args, "--remote", remote], { home, env: { GROVE_IDLE_TIMEOUT: "1", GROVE_CONNECT_TIMEOUT: "1", SERVICE_API_KEY: "grove_test", ...env } })
}

describe("a server that accepts the connection and never answers", () => {
  it("fails each command after the idle timeout with rc 6 and one line naming the server; a GET is tried once more, a write never", async () => {
    const server = await fakeServer(() => undefined)
    try {
      const list = await run(["repo", "list"], server.url)
      expect({ code: list.code, stderr: list.stderr }).toEqual({
        code: 6,
        stderr: `grove: network failure talking to ${server.url}: the server went silent for 1 s (set GROVE_IDLE_TIMEOUT to wait longer)\n`
      })
      expect(server.seen.filter((s) => s.startsWith("GET "))).toHaveLength(2)
      const asJson = await run(["repo", "list", "--json"], server.url)
      expect({ code: asJson.code, out: JSON.parse(asJson.stdout) }).toEqual({
        code: 6,
        out: { error: `network failure talking to ${server.url}: the server went silent for 1 s (set GROVE_IDLE_TIMEOUT to wait longer)`, code: "network" }
      })

      // A create is not safe to send twice: it goes once. Its answer is waited for GROVE_WRITE_TIMEOUT once sent.
      server.seen.length = 0
      const create = await run(["repo", "create", "silent"], server.url, { GROVE_WRITE_TIMEOUT: "2" })
      expect({ code: create.code, stderr: create.stderr }).toEqual({
        code: 6,
        stderr: expect.stringMatching(/: the server sent no answer for 2 s after the request \(set GROVE_WRITE_TIMEOUT to wait longer\)\n$/)
      })
      expect(server.seen).toEqual(["POST /api/repos"])

      // A clone gives up the same way and leaves no folder behind.
      const home = tempDir("net-clone")
      const cloned = await grove(["clone", "alice/x", "dest", "--remote", server.url], { home, env: { GROVE_IDLE_TIMEOUT: "1", SERVICE_API_KEY: "grove_test" } })
      expect(cloned.code).toBe(6)
      expect(cloned.stderr).toMatch(/^grove: network failure talking to .*: the server went silent for 1 s/)
      expect(fs.existsSync(path.join(home, "dest"))).toBe(false)
    } finally {
      await server.close()
    }
  }, 120_000)

  it("GROVE_IDLE_TIMEOUT or GROVE_CONNECT_TIMEOUT that is not a number of seconds is a usage error (2), before anything is sent", async () => {
    const server = await fakeServer(() => undefined)
    try {
      const bad = await run(["repo", "list"], server.url, { GROVE_IDLE_TIMEOUT: "soon" })
      expect({ code: bad.code, stderr: bad.stderr }).toEqual({
        code: 2,
        stderr: "grove: GROVE_IDLE_TIMEOUT must be a number of seconds up to 86400 (0: no limit), not \"soon\"\n"
      })
      const asJson = await run(["repo", "list", "--json"], server.url, { GROVE_CONNECT_TIMEOUT: "-1" })
      expect({ code: asJson.code, code2: JSON.parse(asJson.stdout).code }).toEqual({ code: 2, code2: "usage" })
      expect(server.seen).toEqual([])
    } finally {
      await server.close()
    }
  }, 60_000)
})

describe("a write the server works on before answering", () => {
  it("is answered after the idle timeout, within GROVE_WRITE_TIMEOUT (default 300 s): the command succeeds", async () => {
    // The server reads the request, then works 5 s before its first byte (a push's preparation does, for minutes).
    const server = await fakeServer((request, response) => {
      request.resume()
      request.on("end", () =>
        setTimeout(() => {
          const now = new Date().toISOString()
          response.writeHead(201, { "content-type": "application/json" })
          response.end(JSON.stringify({
            id: "r1",
            owner: "alice",
            name: "slow",
            full_name: "alice/slow",
            is_public: false,
            visibility: "private",
            head: null,
            default_branch: "main",
            created_at: now,
            updated_at: now
          }))
        }, 5_000))
    })
    try {
      const create = await run(["repo", "create", "slow", "--json"], server.url)
      expect({ code: create.code, stderr: create.stderr, out: create.code === 0 ? JSON.parse(create.stdout) : create.stdout }).toMatchObject({
        code: 0,
        stderr: "",
        out: { full_name: "alice/slow" }
      })
      expect(server.seen).toEqual(["POST /api/repos"])
    } finally {
      await server.close()
    }
  }, 60_000)
})

describe("a clone whose chunks/fetch the server never answers", () => {
  it("fails after GROVE_IDLE_TIMEOUT, not GROVE_WRITE_TIMEOUT (a read sent as POST), with rc 6 and no folder left", async () => {
    const server = await startSuiteServer()
    const owner = { home: tempDir("stall-owner"), env: { SERVICE_API_KEY: await server.createUser("fay"), GROVE_REMOTE: server.url } }
    const work = tempDir("stall-work")
    for (let i = 0; i < 3; i++) fs.writeFileSync(path.join(work, `f${i}.txt`), `file ${i}\n`.repeat(2_000))
    await ok(["init", "--name", "stall", "--json"], at(owner, work))
    await ok(["commit", "--json"], at(owner, work))
    const pushed = json(await ok(["push", "--json"], at(owner, work)))
    // Passes everything on to the server but chunks/fetch, which it reads and never answers.
    const target = new URL(server.url)
    const stalled = await fakeServer((request, response) => {
      const pieces: Array<Buffer> = []
      request.on("data", (d: Buffer) => pieces.push(d))
      request.on("end", () => {
        if (request.method === "POST" && request.url?.endsWith("/chunks/fetch") === true) return
        const forward = http.request({ hostname: target.hostname, port: target.port, method: request.method, path: request.url, headers: request.headers }, (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
          answer.pipe(response)
        })
        forward.on("error", () => response.destroy())
        forward.end(Buffer.concat(pieces))
      })
    })
    try {
      const home = tempDir("stall-clone")
      const started = Date.now()
      // Killed at 60 s: before, each of the two tries waited GROVE_WRITE_TIMEOUT (300 s).
      const cloned = await spawnGrove(["clone", "fay/stall", "dest", "--branch", pushed.branch, "--remote", stalled.url], {
        home,
        env: { SERVICE_API_KEY: owner.env.SERVICE_API_KEY, GROVE_IDLE_TIMEOUT: "2" }
      }, 60_000).done
      const seconds = (Date.now() - started) / 1000
      expect({ code: cloned.code, stderr: cloned.stderr }).toEqual({
        code: 6,
        stderr: `grove: network failure talking to ${stalled.url}: the server went silent for 2 s (set GROVE_IDLE_TIMEOUT to wait longer)\n`
      })
      expect(seconds).toBeLessThan(30)
      expect(stalled.seen.filter((s) => s.endsWith("/chunks/fetch")).length).toBeGreaterThan(0)
      expect(fs.existsSync(path.join(home, "dest"))).toBe(false)
    } finally {
      await stalled.close()
    }
  }, 180_000)
})

describe("grove release publish (fetch)", () => {
  it("to a server that never answers: rc 6 after GROVE_WRITE_TIMEOUT, one line", async () => {
    const server = await fakeServer((request) => void request.resume())
    try {
      const file = path.join(tempDir("net-release"), "grove.bin")
      fs.writeFileSync(file, "binary")
      const published = await run(["release", "publish", "1.2.3", "linux-x86_64", file], server.url, { GROVE_WRITE_TIMEOUT: "2" })
      expect({ code: published.code, stderr: published.stderr }).toEqual({
        code: 6,
        stderr: `grove: cannot connect to ${server.url}: the server went silent for 2 s (set GROVE_WRITE_TIMEOUT to wait longer)\n`
      })
      expect(server.seen).toEqual(["PUT /api/releases/1.2.3/linux-x86_64"])
    } finally {
      await server.close()
    }
  }, 60_000)
})

describe("grove ci logs -f (server-sent events, fetch)", () => {
  const follow = (url: string) => run(["ci", "logs", "1", "-f", "--repo", "alice/x"], url)
  // fetch does not tell whether its connection was made: a server silent before its headers reads "cannot connect".
  const silentLine = (url: string, connected: boolean) =>
    `grove: ${connected ? "network failure talking to" : "cannot connect to"} ${url}: the server went silent for 1 s (set GROVE_IDLE_TIMEOUT to wait longer)\n`

  it("a server that never answers, or answers and then goes silent: rc 6 after the idle timeout", async () => {
    const never = await fakeServer(() => undefined)
    const mute = await fakeServer((_q, r) => {
      r.writeHead(200, { "content-type": "text/event-stream" })
      r.write(": keepalive\n\n")
    })
    try {
      const a = await follow(never.url)
      expect({ code: a.code, stderr: a.stderr }).toEqual({ code: 6, stderr: silentLine(never.url, false) })
      const b = await follow(mute.url)
      expect({ code: b.code, stderr: b.stderr }).toEqual({ code: 6, stderr: silentLine(mute.url, true) })
    } finally {
      await never.close()
      await mute.close()
    }
  }, 120_000)

  it("a run that outlasts the idle timeout is followed to its end while the server sends keep-alives", async () => {
    // Keep-alives every 0.5 s against a 5 s bound, for 12 s.
    const server = await fakeServer((_q, r) => {
      r.writeHead(200, { "content-type": "text/event-stream" })
      const beat = setInterval(() => r.write(": keepalive\n\n"), 500)
      setTimeout(() => {
        clearInterval(beat)
        r.end(`event: log\ndata: ${JSON.stringify({ text: "built\n" })}\n\nevent: end\ndata: ${JSON.stringify({ status: "completed", conclusion: "success" })}\n\n`)
      }, 12_000)
    })
    try {
      const followed = await run(["ci", "logs", "1", "-f", "--repo", "alice/x"], server.url, { GROVE_IDLE_TIMEOUT: "5" })
      expect({ code: followed.code, stdout: followed.stdout, stderr: followed.stderr }).toEqual({ code: 0, stdout: "built\n", stderr: "Run 1: success\n" })
    } finally {
      await server.close()
    }
  }, 60_000)
})

describe("a listener that never takes the connection", () => {
  it("fails after the connect timeout with rc 6", async () => {
    // Its process never accepts (its event loop blocked as soon as it listens) and its backlog is full: a SYN to it
    // goes unanswered.
    const child = spawn(process.execPath, [
      "-e",
      "const s = require('node:net').createServer(); s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => { require('node:fs').writeSync(1, s.address().port + '\\n'); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0) })"
    ], { stdio: ["ignore", "pipe", "ignore"] })
    const fill: Array<net.Socket> = []
    try {
      const port = await new Promise<number>((resolve) => child.stdout.once("data", (data: Buffer) => resolve(Number(data.toString()))))
      await new Promise((resolve) => setTimeout(resolve, 300))
      for (let i = 0; i < 4; i++) fill.push(net.connect(port, "127.0.0.1").on("error", () => undefined))
      await new Promise((resolve) => setTimeout(resolve, 300))
      const list = await run(["repo", "list"], `http://127.0.0.1:${port}`)
      expect({ code: list.code, stderr: list.stderr }).toEqual({
        code: 6,
        stderr: `grove: cannot connect to http://127.0.0.1:${port}: no connection after 1 s (set GROVE_CONNECT_TIMEOUT to wait longer)\n`
      })
    } finally {
      for (const socket of fill) socket.destroy()
      child.kill("SIGKILL")
    }
  }, 120_000)
})

describe("answers the client cannot use", () => {
  const cases: ReadonlyArray<readonly [string, (request: http.IncomingMessage, response: http.ServerResponse) => void, number, RegExp]> = [
    ["an answer cut short", (_q, r) => {
      r.writeHead(200, { "content-type": "application/json", "content-length": "500" })
      r.write("{\"repos\":[", () => r.socket?.destroy())
    }, 6, /^grove: network failure talking to \S+: the connection broke within the server's answer, 10 bytes in\n$/],
    ["a connection reset before any answer", (q) => q.socket.destroy(), 6, /^grove: network failure talking to \S+: the server closed the connection without answering\n$/],
    ["a 500 with an HTML page", (_q, r) => {
      r.writeHead(500, { "content-type": "text/html" })
      r.end("<html><body><h1>500 Internal Server Error</h1></body></html>")
    }, 1, /^grove: the server answered HTTP 500\n$/],
    ["a 200 that is not JSON", (_q, r) => {
      r.writeHead(200, { "content-type": "application/json" })
      r.end("<html>captive portal</html>")
    }, 1, /^grove: unexpected answer from \S+ \(is it a Grove server of a compatible version\?\)/]
  ]
  for (const [name, answer, code, stderr] of cases) {
    it(`${name}: rc ${code}, one clear line, no stack`, async () => {
      const server = await fakeServer(answer)
      try {
        const list = await run(["repo", "list"], server.url)
        expect({ code: list.code, stdout: list.stdout }).toEqual({ code, stdout: "" })
        expect(list.stderr).toMatch(stderr)
        expect(list.stderr).not.toMatch(/\n\s+at /)
      } finally {
        await server.close()
      }
    }, 60_000)
  }
})
