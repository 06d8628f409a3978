/**
 * The listener's part of a graceful drain, on a real node:http server: a request in flight when the stop
 * begins is answered (with `Connection: close`), new connections are refused once the listener closes,
 * the listener stays open for `closeDelayMs`, and a request still running at the drain deadline is cut.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { drainingServer, type RequestGate } from "./DrainingServer.ts"

const servers: Array<http.Server> = []
afterEach(() => {
  for (const server of servers.splice(0)) server.closeAllConnections()
})

/** A server whose `/slow?ms=N` answers after N ms and `/hang` never answers; resolves once listening. */
const serve = async (drainMs: number, closeDelayMs = 0, gate?: RequestGate) => {
  let closing = 0
  const server = drainingServer(drainMs, { closeDelayMs, onClosing: () => closing++, gate })()
  servers.push(server)
  const arrived: Array<string> = []
  server.on("request", (request: http.IncomingMessage, response: http.ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://x")
    arrived.push(url.pathname)
    if (url.pathname === "/hang") return
    if (url.pathname === "/stall") {
      // The event loop held for `ms` after the answer (a long synchronous statement at load), asleep: no CPU.
      response.end("done", () => setImmediate(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(url.searchParams.get("ms")))))
      return
    }
    setTimeout(() => response.end("done"), Number(url.searchParams.get("ms") ?? "0"))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  const closed = () => new Promise<void>((resolve) => server.close(() => resolve()))
  return { server, port, arrived, closing: () => closing, closed }
}

interface Answer {
  readonly status?: number
  readonly connection?: string | undefined
  readonly body?: string
  readonly error?: string
}

const get = (port: number, path: string) =>
  new Promise<Answer>((resolve) => {
    const request = http.get({ host: "127.0.0.1", port, path, agent: false }, (response) => {
      let body = ""
      response.on("data", (chunk: Buffer) => (body += chunk.toString()))
      response.on("end", () => resolve({ status: response.statusCode!, connection: response.headers.connection, body }))
      response.on("error", (error) => resolve({ error: (error as NodeJS.ErrnoException).code ?? error.message }))
    })
    request.on("error", (error) => resolve({ error: (error as NodeJS.ErrnoException).code ?? error.message }))
  })

const until = async (check: () => boolean) => {
  while (!check()) await new Promise((r) => setTimeout(r, 5))
}

describe("drainingServer", () => {
  it("answers a request in flight at the stop (Connection: close), then refuses new connections", async () => {
    const { server, port, arrived, closing } = await serve(10_000)
    const inFlight = get(port, "/slow?ms=400")
    await until(() => arrived.length === 1)
    const stopped = new Promise<void>((resolve) => server.close(() => resolve()))
    expect(closing()).toBe(1)
    expect(await get(port, "/slow")).toEqual({ error: "ECONNREFUSED" })
    expect(await inFlight).toEqual({ status: 200, connection: "close", body: "done" })
    await stopped
  })

  it("keeps the listener open for closeDelayMs, every answer closing its connection", async () => {
    const { port, closing, closed } = await serve(10_000, 600)
    const stopped = closed()
    expect(closing()).toBe(1)
    expect(await get(port, "/slow?ms=1")).toEqual({ status: 200, connection: "close", body: "done" })
    await stopped
    expect(await get(port, "/slow")).toEqual({ error: "ECONNREFUSED" })
  })

  it("cuts a request still running at the drain deadline, so the stop ends", async () => {
    const { port, arrived, closed } = await serve(300)
    const hanging = get(port, "/hang")
    await until(() => arrived.length === 1)
    const began = Date.now()
    await closed()
    expect(Date.now() - began).toBeGreaterThanOrEqual(250)
    expect((await hanging).error).toBe("ECONNRESET")
  })

  it("a gate that throws before answering: reported, and the app answers (the process lives)", async () => {
    const failures: Array<unknown> = []
    const gate: RequestGate = {
      answer: () => {
        throw new Error("gate broke")
      },
      failed: (error) => failures.push(error)
    }
    const { port, arrived } = await serve(10_000, 0, gate)
    expect(await get(port, "/slow?ms=1")).toMatchObject({ status: 200, body: "done" })
    expect(arrived).toEqual(["/slow"])
    expect(failures.map((e) => (e as Error).message)).toEqual(["gate broke"])
  })

  it("a gate that throws after beginning its answer: its connection is closed, the app never sees it", async () => {
    const failures: Array<unknown> = []
    const gate: RequestGate = {
      answer: (_request, response) => {
        response.writeHead(200, { "content-length": 4 })
        throw new Error("broke mid-answer")
      },
      failed: (error) => failures.push(error)
    }
    const { port, arrived } = await serve(10_000, 0, gate)
    expect((await get(port, "/slow")).error).toBeDefined()
    expect(arrived).toEqual([])
    expect(failures).toHaveLength(1)
  })

  it("a request sent on a kept-alive connection while the server stalls past node's 5 s keep-alive is answered", async () => {
    // Node runs an expired keep-alive timer before it reads a request already waiting on that socket: with the
    // default 5 s, a stall of 6 s closed the connection under the client's next request ("other side closed").
    const { port } = await serve(10_000)
    const client = `
      const http = require("node:http")
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      const get = (path) => new Promise((resolve) => {
        const request = http.get({ host: "127.0.0.1", port: ${port}, path, agent }, (response) => {
          let body = ""
          response.on("data", (chunk) => (body += chunk))
          response.on("end", () => resolve(body))
        })
        request.on("error", (error) => resolve(error.code ?? error.message))
      })
      get("/stall?ms=6000").then((first) => get("/slow?ms=0").then((second) => {
        console.log(JSON.stringify([first, second]))
        agent.destroy()
      }))
    `
    const out = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ["-e", client], { timeout: 60_000 }, (error, stdout) => (error ? reject(error) : resolve(stdout)))
    )
    expect(JSON.parse(out)).toEqual(["done", "done"])
  }, 60_000)
})
