import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { spawn } from "node:child_process"
import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import * as zlib from "node:zlib"
import { closedPort } from "../../test/support.ts"
import { networkFailure } from "../Failures.ts"
import { networkTimeouts, nodeHttpClient, sendBytes } from "./HttpTransport.ts"

/** A server answering every request with `answer`; released with its connections. */
const answering = (answer: (request: http.IncomingMessage, response: http.ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; server: http.Server }>((resolve) => {
        const server = http.createServer(answer)
        server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }))
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  )

const codeOf = (e: Error & { code?: string }) => e.code


const encoders: Record<string, (data: Buffer) => Buffer> = {
  zstd: (data) => zlib.zstdCompressSync(data),
  gzip: (data) => zlib.gzipSync(data),
  deflate: (data) => zlib.deflateSync(data),
  br: (data) => zlib.brotliCompressSync(data)
}

/** Echoes the request (method, headers, body) as JSON, encoded as `?encoding=` asks; counts connections. */
const echoServer = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ url: string; connections: () => number; server: http.Server }>((resolve) => {
      let connections = 0
      const server = http.createServer((request, response) => {
        const parts: Array<Buffer> = []
        request.on("data", (part: Buffer) => parts.push(part))
        request.on("end", () => {
          const encoding = new URL(request.url!, "http://x").searchParams.get("encoding")
          const plain = Buffer.from(JSON.stringify({ method: request.method, headers: request.headers, body: Buffer.concat(parts).toString() }))
          const headers: Record<string, string> = { "content-type": "application/json" }
          if (encoding !== null) headers["content-encoding"] = encoding
          response.writeHead(encoding === "unknown" ? 200 : 201, headers)
          response.end(encoding === null || encoding === "unknown" ? plain : encoders[encoding]!(plain))
        })
      })
      server.on("connection", () => connections++)
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resolve({ url: `http://127.0.0.1:${port}`, connections: () => connections, server })
      })
    })
  ),
  ({ server }) =>
    Effect.promise(() =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
    )
)

const text = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString())

describe("HttpTransport", () => {
  it.live("decodes zstd, gzip, deflate and br answers, over one kept-alive connection", () =>
    Effect.gen(function*() {
      const server = yield* echoServer
      for (const encoding of [undefined, "zstd", "gzip", "deflate", "br"]) {
        const answer = yield* Effect.promise(() =>
          sendBytes(`${server.url}/x${encoding === undefined ? "" : `?encoding=${encoding}`}`, {
            method: "POST",
            headers: { "content-type": "application/octet-stream", "x-probe": "1" },
            body: new Uint8Array([104, 105])
          })
        )
        expect({ encoding, status: answer.status, contentType: answer.headers["content-type"] }).toEqual({ encoding, status: 201, contentType: "application/json" })
        expect(text(answer.body)).toMatchObject({ method: "POST", body: "hi", headers: { "x-probe": "1", "content-length": "2" } })
      }
      // Five requests in sequence, one connection: the agent keeps it alive.
      expect(server.connections()).toBe(1)
      // An encoding it cannot read is an error, not bytes taken for the body.
      const unknown = yield* Effect.promise(() => sendBytes(`${server.url}/x?encoding=unknown`, { method: "GET" }).then(() => "read", (e: Error) => e.message))
      expect(unknown).toMatch(/unsupported content-encoding unknown/)
    }).pipe(Effect.scoped))

  it.live("the typed client's HttpClient: the request's body and headers go out, a zstd answer is read decoded", () =>
    Effect.gen(function*() {
      const server = yield* echoServer
      const request = yield* HttpClientRequest.bodyJson(HttpClientRequest.post(`${server.url}/y?encoding=zstd`), { a: [1, 2] }).pipe(
        Effect.map(HttpClientRequest.setHeader("authorization", "Bearer t"))
      )
      const response = yield* nodeHttpClient.execute(request)
      expect(response.status).toBe(201)
      expect(response.headers["content-encoding"]).toBe("zstd")
      const body = (yield* response.json) as { method: string; body: string; headers: Record<string, string> }
      expect(body).toMatchObject({ method: "POST", body: "{\"a\":[1,2]}", headers: { authorization: "Bearer t", "content-type": "application/json" } })
    }).pipe(Effect.scoped))

  it.live("an answer cut short (the connection closed within its body) is an error, not a shorter body", () =>
    Effect.gen(function*() {
      const server = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<{ url: string; server: http.Server }>((resolve) => {
            const server = http.createServer((_request, response) => {
              response.writeHead(200, { "content-type": "application/json", "content-length": "100" })
              response.write("{\"partial\":", () => response.socket?.destroy())
            })
            server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }))
          })
        ),
        ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
      )
      const outcome = yield* Effect.promise(() => sendBytes(`${server.url}/`, { method: "GET" }).then(() => "answered", (e: Error & { code?: string }) => e.code))
      expect(outcome).toBe("ECONNRESET")
    }).pipe(Effect.scoped))

  it.live("a refused connection is a TransportError carrying the socket's code (Retry.ts retries on it)", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const error = yield* Effect.flip(HttpClient.get(`http://127.0.0.1:${port}/`).pipe(Effect.provideService(HttpClient.HttpClient, nodeHttpClient)))
      expect(HttpClientError.isHttpClientError(error) && error.reason._tag).toBe("TransportError")
      expect((error.reason as { cause?: { code?: string } }).cause?.code).toBe("ECONNREFUSED")
    }))

  it.live("an answer past maxBytes is refused, on the wire or decoded (a zstd bomb of a few KiB), not read into memory", () =>
    Effect.gen(function*() {
      const plain = Buffer.alloc(4 * 1024 * 1024)
      const bomb = zlib.zstdCompressSync(plain)
      expect(bomb.length).toBeLessThan(64 * 1024)
      const server = yield* answering((request, response) => {
        const encoded = request.url === "/bomb"
        response.writeHead(200, encoded ? { "content-encoding": "zstd" } : {})
        response.end(encoded ? bomb : plain)
      })
      const send = (path: string, maxBytes: number) =>
        Effect.promise(() => sendBytes(`${server.url}${path}`, { method: "GET", maxBytes }).then((a) => a.body.length, codeOf))
      expect(yield* send("/bomb", 1024 * 1024)).toBe("ERR_ANSWER_TOO_LARGE")
      expect(yield* send("/plain", 1024 * 1024)).toBe("ERR_ANSWER_TOO_LARGE")
      // Within the bound both are read whole.
      expect(yield* send("/bomb", plain.length)).toBe(plain.length)
      expect(yield* send("/plain", plain.length)).toBe(plain.length)
    }).pipe(Effect.scoped))

  it.live("a server that stops answering fails the request with ETIMEDOUT after the idle timeout", () =>
    Effect.gen(function*() {
      const server = yield* answering((_request, response) => response.writeHead(200, { "content-length": "10" }).write("12345"))
      const outcome = yield* Effect.promise(() =>
        sendBytes(`${server.url}/`, { method: "GET", idleTimeoutMs: 300 }).then(() => "answered", codeOf)
      )
      expect(outcome).toBe("ETIMEDOUT")
    }).pipe(Effect.scoped))
  it.live("a listener that never takes the connection fails the request with ERR_CONNECT_TIMEOUT after the connect timeout", () =>
    Effect.gen(function*() {
      // A listener whose process never accepts (its event loop blocked as soon as it listens), its backlog filled: a SYN
      // to it goes unanswered.
      const { port } = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<{ port: number; stop: () => void }>((resolve) => {
            const child = spawn(process.execPath, [
              "-e",
              "const s = require('node:net').createServer(); s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => { require('node:fs').writeSync(1, s.address().port + '\\n'); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0) })"
            ], { stdio: ["ignore", "pipe", "ignore"] })
            child.stdout.once("data", (data: Buffer) => {
              const port = Number(data.toString())
              setTimeout(() => {
                const fill = Array.from({ length: 4 }, () => net.connect(port, "127.0.0.1").on("error", () => undefined))
                setTimeout(() => resolve({ port, stop: () => [...fill.map((s) => s.destroy()), child.kill("SIGKILL")] }), 300)
              }, 300)
            })
          })
        ),
        ({ stop }) => Effect.sync(stop)
      )
      const outcome = yield* Effect.promise(() =>
        Promise.race([
          sendBytes(`http://127.0.0.1:${port}/`, { method: "GET", connectTimeoutMs: 300, idleTimeoutMs: 60_000 }).then(() => "answered", (e: Error) => `${codeOf(e)} ${networkFailure("R", e).message}`),
          new Promise<string>((resolve) => setTimeout(() => resolve("still connecting after 10 s"), 10_000).unref())
        ])
      )
      expect(outcome).toBe("ERR_CONNECT_TIMEOUT cannot connect to R: no connection after 0.3 s (set GROVE_CONNECT_TIMEOUT to wait longer)")
    }).pipe(Effect.scoped), 30_000)

  it.live("a failure reads 'cannot connect' only when no connection was made; once connected, 'network failure talking to'", () =>
    Effect.gen(function*() {
      const refused = yield* closedPort
      const keptPorts: Array<number> = []
      const server = yield* answering((request, response) => {
        if (request.url === "/kept") keptPorts.push(request.socket.remotePort!)
        if (request.url === "/silent") return void response.writeHead(200, { "content-length": "10" }).write("12345")
        if (request.url === "/reset") return void request.socket.destroy()
        if (request.url === "/cut") return void response.writeHead(200, { "content-length": "10" }).write("12345", () => request.socket.destroy())
        // The first answer leaves the connection kept alive; the next request on it finds the server silent.
        if (keptPorts.length === 1) return void response.end("ok")
      })
      const failed = (url: string) =>
        sendBytes(url, { method: "GET", idleTimeoutMs: 300, connectTimeoutMs: 5_000 }).then(
          () => "answered",
          (e: unknown) => networkFailure("R", e).message
        )
      const outcomes = yield* Effect.promise(async () => [
        await failed(`http://127.0.0.1:${refused}/`),
        await failed(`${server.url}/silent`),
        await failed(`${server.url}/reset`),
        await failed(`${server.url}/cut`),
        await failed(`${server.url}/kept`),
        await failed(`${server.url}/kept`)
      ])
      expect(outcomes).toEqual([
        expect.stringMatching(/^cannot connect to R: connect ECONNREFUSED /),
        "network failure talking to R: the server went silent for 0.3 s (set GROVE_IDLE_TIMEOUT to wait longer)",
        "network failure talking to R: the server closed the connection without answering",
        "network failure talking to R: the connection broke within the server's answer, 5 bytes in",
        "answered",
        "network failure talking to R: the server went silent for 0.3 s (set GROVE_IDLE_TIMEOUT to wait longer)"
      ])
      // The last request went over the first one's connection, reused.
      expect(new Set(keptPorts).size).toBe(1)
    }).pipe(Effect.scoped))

  it.live("a write's answer may come after the idle bound, within the write bound, once its body is sent; a read's may not", () =>
    Effect.gen(function*() {
      // The server reads the body, then works 6 s before its first byte (a push's preparation does, for minutes).
      const server = yield* answering((request, response) => {
        let received = 0
        request.on("data", (part: Buffer) => void (received += part.length))
        request.on("end", () => setTimeout(() => response.end(`${request.method} ${received}`), 6_000))
      })
      const send = (method: string, body: Uint8Array | undefined, writeTimeoutMs: number, route = "") =>
        sendBytes(`${server.url}/${route}`, { method, body, idleTimeoutMs: 1_500, writeTimeoutMs, connectTimeoutMs: 10_000 }).then(
          (a) => Buffer.from(a.body).toString(),
          (e: Error) => `${codeOf(e)} ${e.message}`
        )
      // 320 KiB go in parts (and their drain allowance, 2.5 s, is less than the server's work).
      const outcomes = yield* Effect.promise(() =>
        Promise.all([
          send("POST", new Uint8Array(10), 60_000),
          send("PUT", new Uint8Array(320 * 1024), 60_000),
          send("DELETE", undefined, 60_000),
          send("GET", undefined, 60_000),
          send("POST", new Uint8Array(10), 3_000),
          // Reads sent as POST (HttpSend's READ_POST) are bounded as a GET; a chunk upload is a write.
          send("POST", new Uint8Array(10), 60_000, "api/o/r/chunks/fetch"),
          send("POST", new Uint8Array(10), 60_000, "api/o/r/blobs/info"),
          send("POST", new Uint8Array(10), 60_000, "api/o/r/commits/info"),
          send("POST", new Uint8Array(10), 60_000, "api/o/r/chunks/batch")
        ])
      )
      const silent = "ETIMEDOUT the server went silent for 1.5 s (set GROVE_IDLE_TIMEOUT to wait longer)"
      expect(outcomes).toEqual([
        "POST 10",
        `PUT ${320 * 1024}`,
        "DELETE 0",
        silent,
        "ETIMEDOUT the server sent no answer for 3 s after the request (set GROVE_WRITE_TIMEOUT to wait longer)",
        silent,
        silent,
        silent,
        "POST 10"
      ])
    }).pipe(Effect.scoped), 60_000)

  it.live("an upload that keeps moving is not cut by the idle timeout, however long it takes in all", () =>
    Effect.gen(function*() {
      // The server reads at most 256 KiB/s (a pause after each part): 6 MiB take 24 s or more, the idle bound is 5 s
      // (a 256 KiB part goes out every ~1 s). The last MiBs wait in the kernel's buffers after the last write, unseen:
      // ~3 MiB here, 12 s at that pace, is not silence either (the drain allowance).
      const server = yield* answering((request, response) => {
        let received = 0
        request.on("data", (part: Buffer) => {
          received += part.length
          request.pause()
          setTimeout(() => request.resume(), part.length / 256)
        })
        request.on("end", () => response.end(String(received)))
      })
      const body = new Uint8Array(6 * 1024 * 1024)
      const answer = yield* Effect.promise(() =>
        sendBytes(`${server.url}/`, { method: "POST", body, idleTimeoutMs: 5_000, writeTimeoutMs: 5_000 }).then((a) => Buffer.from(a.body).toString(), codeOf)
      )
      expect(answer).toBe(String(body.length))
    }).pipe(Effect.scoped), 120_000)

  it.live("a streamed answer's consumer may take longer than the idle timeout: its own time is not the server's silence", () =>
    Effect.gen(function*() {
      const server = yield* answering((_request, response) => {
        response.writeHead(200, { "content-type": "application/octet-stream" })
        response.write("first", () => setTimeout(() => response.end("second"), 50))
      })
      const parts: Array<string> = []
      const outcome = yield* Effect.promise(() =>
        sendBytes(`${server.url}/`, {
          method: "GET",
          idleTimeoutMs: 5_000,
          stream: () => ({
            // The first part's consumer takes twice the idle bound.
            part: (part) => {
              parts.push(part.toString())
              return parts.length === 1 ? new Promise<void>((resolve) => setTimeout(resolve, 10_000)) : undefined
            },
            done: () => parts.push("done")
          })
        }).then(() => "answered", codeOf)
      )
      expect({ outcome, parts }).toEqual({ outcome: "answered", parts: ["first", "second", "done"] })
    }).pipe(Effect.scoped), 60_000)

  it("the bounds come from GROVE_CONNECT_TIMEOUT and GROVE_IDLE_TIMEOUT, in seconds (0: none); a bad value is named", () => {
    expect(networkTimeouts({})).toEqual({ connectMs: 10_000, idleMs: 30_000, writeMs: 300_000 })
    expect(networkTimeouts({ GROVE_CONNECT_TIMEOUT: "2.5", GROVE_IDLE_TIMEOUT: "0", GROVE_WRITE_TIMEOUT: "600" })).toEqual({
      connectMs: 2_500,
      idleMs: 0,
      writeMs: 600_000
    })
    expect(networkTimeouts({ GROVE_IDLE_TIMEOUT: " " })).toEqual({ connectMs: 10_000, idleMs: 30_000, writeMs: 300_000 })
    for (const bad of ["abc", "-1", "1e9", "Infinity"]) {
      expect(networkTimeouts({ GROVE_IDLE_TIMEOUT: bad })).toEqual({
        error: `GROVE_IDLE_TIMEOUT must be a number of seconds up to 86400 (0: no limit), not ${JSON.stringify(bad)}`
      })
    }
    expect(networkTimeouts({ GROVE_CONNECT_TIMEOUT: "x" })).toMatchObject({ error: expect.stringMatching(/^GROVE_CONNECT_TIMEOUT /) })
    expect(networkTimeouts({ GROVE_WRITE_TIMEOUT: "-5" })).toMatchObject({ error: expect.stringMatching(/^GROVE_WRITE_TIMEOUT /) })
  })

  it.live("a streamed answer is taken part by part as it arrives, paused while a part's promise is pending; a consumer's error fails it", () =>
    Effect.gen(function*() {
      let tookFirst: () => void = () => {}
      const firstTaken = new Promise<void>((resolve) => (tookFirst = resolve))
      const server = yield* answering((_request, response) => {
        response.writeHead(200, { "content-type": "application/octet-stream" })
        // The rest goes only after the client took the first part: an answer read whole would never end.
        response.write("first", () => void firstTaken.then(() => response.end("second")))
      })
      const log: Array<string> = []
      const answer = yield* Effect.promise(() =>
        sendBytes(`${server.url}/`, {
          method: "GET",
          stream: (status, headers) => {
            log.push(`${status} ${headers["content-type"]}`)
            return {
              part: (part) => {
                log.push(`part ${part.toString()}`)
                if (part.toString() !== "first") return undefined
                tookFirst()
                return new Promise<void>((resolve) =>
                  setTimeout(() => {
                    log.push("written")
                    resolve()
                  }, 100)
                )
              },
              done: () => log.push("done")
            }
          }
        })
      )
      expect(log).toEqual(["200 application/octet-stream", "part first", "written", "part second", "done"])
      expect(answer.body.length).toBe(0)
      // A consumer that throws (a bad frame) fails the request with its error; so does a rejected part.
      const failing = (fail: (part: Buffer) => Promise<void> | undefined) =>
        Effect.promise(() =>
          sendBytes(`${server.url}/`, { method: "GET", stream: () => ({ part: fail, done: () => {} }) }).then(() => "answered", (e: Error) => e.message)
        )
      expect(yield* failing(() => {
        throw new Error("bad frame")
      })).toBe("bad frame")
      expect(yield* failing(() => Promise.reject(new Error("disk full")))).toBe("disk full")
    }).pipe(Effect.scoped))
})
