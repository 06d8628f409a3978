import { describe, expect, it } from "@effect/vitest"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import { closedPort } from "../../test/support.ts"
import type { SendInit } from "./HttpSend.ts"
import { sendStreamed, streamsOverSocket } from "./StreamSocket.ts"

/** A server that answers every connection with `answer` (raw bytes, so heads and bodies can be cut anywhere). */
const rawServer = async (answer: (socket: net.Socket, request: string) => void) => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => {})
    let request = ""
    socket.on("data", (part) => {
      const had = request.includes("\r\n\r\n")
      request += part.toString("latin1")
      if (!had && request.includes("\r\n\r\n")) answer(socket, request)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/o/r/chunks/fetch`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
}

/** Writes `bytes` in pieces of 1..max bytes, a few milliseconds apart now and then (so reads cut them anywhere). */
const dribble = async (socket: net.Socket, bytes: Buffer, seed: number, max = 9000) => {
  let state = seed
  const next = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648
  for (let at = 0; at < bytes.length && !socket.destroyed;) {
    const size = 1 + Math.floor(next() * max)
    socket.write(bytes.subarray(at, at + size))
    at += size
    if (next() < 0.2) await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

const bodyOf = (length: number, seed: number) => {
  const bytes = Buffer.alloc(length)
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff
  return bytes
}

/** The body in chunked transfer coding, in chunks of varied sizes, with a trailer. */
const chunked = (body: Buffer) => {
  const parts: Array<Buffer> = []
  for (let at = 0, n = 1; at < body.length; n++) {
    const size = Math.min(body.length - at, (n * 7919) % 70_000 + 1)
    parts.push(Buffer.from(`${size.toString(16)}\r\n`), body.subarray(at, at + size), Buffer.from("\r\n"))
    at += size
  }
  parts.push(Buffer.from("0\r\nx-trailer: 1\r\n\r\n"))
  return Buffer.concat(parts)
}

/** A consumer that keeps what it is handed, answering every third part with a promise, and checks that a part it holds stays as it was. */
const keeping = () => {
  const parts: Array<Buffer> = []
  const log: Array<string> = []
  let n = 0
  const init: SendInit = {
    method: "POST",
    body: "{}",
    stream: (status, headers) => {
      log.push(`${status} ${headers["content-type"]}`)
      return {
        part: (part) => {
          parts.push(Buffer.from(part))
          if (++n % 3 !== 0) return undefined
          const copy = Buffer.from(part)
          // Held past its return: the socket reads nothing into it until this settles.
          return new Promise<void>((resolve, reject) =>
            setTimeout(() => (part.equals(copy) ? resolve() : reject(new Error("a held part changed"))), 1)
          )
        },
        done: () => log.push("done")
      }
    }
  }
  return { init, log, received: () => Buffer.concat(parts) }
}

describe("StreamSocket.sendStreamed", () => {
  it("takes a chunked, a sized and a read-to-close answer part by part as sent, cut anywhere, paused while a part's promise is pending", async () => {
    const body = bodyOf(700_000, 1)
    const forms: Record<string, { readonly head: string; readonly wire: Buffer }> = {
      chunked: { head: "transfer-encoding: chunked\r\n", wire: chunked(body) },
      sized: { head: `content-length: ${body.length}\r\n`, wire: body },
      close: { head: "connection: close\r\n", wire: body }
    }
    let seed = 0
    const server = await rawServer((socket, request) => {
      const form = forms[/x-form: (\w+)/.exec(request)![1]!]!
      const answer = Buffer.concat([Buffer.from(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/x-frames\r\n${form.head}\r\n`), form.wire])
      void dribble(socket, answer, ++seed).then(() => socket.end())
    })
    try {
      for (const form of Object.keys(forms)) {
        const consumer = keeping()
        const answer = await sendStreamed(server.url, { ...consumer.init, headers: { "x-form": form } })
        expect(answer.status).toBe(200)
        expect(answer.body.length).toBe(0)
        expect(consumer.log).toEqual(["200 application/x-frames", "done"])
        expect(consumer.received().equals(body)).toBe(true)
      }
    } finally {
      await server.close()
    }
  })

  it("reads an answer its consumer does not take whole (a refusal), and sends the request's method, path, headers and body", async () => {
    let seen = ""
    const server = await rawServer((socket, request) => {
      seen = request
      const json = JSON.stringify({ error: "nope", code: "not_found" })
      socket.write(`HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${json.length}\r\n\r\n${json}`)
    })
    try {
      const answer = await sendStreamed(server.url, {
        method: "POST",
        headers: { authorization: "Bearer k", "content-type": "application/json" },
        body: Buffer.from("{\"hashes\":[]}"),
        stream: (status) => status === 200 ? { part: () => undefined, done: () => {} } : undefined
      })
      expect(answer.status).toBe(404)
      expect(JSON.parse(Buffer.from(answer.body).toString())).toEqual({ error: "nope", code: "not_found" })
      expect(seen).toMatch(/^POST \/api\/o\/r\/chunks\/fetch HTTP\/1\.1\r\n/)
      expect(seen).toContain("authorization: Bearer k\r\n")
      expect(seen).toContain("content-length: 13\r\n")
      expect(seen.endsWith("{\"hashes\":[]}")).toBe(true)
    } finally {
      await server.close()
    }
  })

  it("fails as sendBytes does: a cut answer, a refused connection, a silent server, a consumer's error, an abort; a consumer's own time is not silence", async () => {
    const body = bodyOf(200_000, 2)
    const server = await rawServer((socket, request) => {
      const what = /x-case: (\w+)/.exec(request)![1]!
      if (what === "silent") return
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`)
      if (what === "cut") socket.end(body.subarray(0, 1000))
      else if (what === "slow") socket.write(body.subarray(0, 1000), () => setTimeout(() => socket.end(body.subarray(1000)), 50))
      else socket.end(body)
    })
    const take = { part: () => undefined, done: () => {} }
    const outcome = (what: string, init: Partial<SendInit> = {}) =>
      sendStreamed(server.url, { method: "POST", headers: { "x-case": what }, stream: () => take, ...init }).then(
        () => "answered",
        (error: Error & { code?: string; connected?: boolean }) => `${error.code} ${error.connected} ${error.message}`
      )
    try {
      expect(await outcome("cut")).toBe("ECONNRESET true the connection broke within the server's answer, 1000 bytes in")
      expect(await outcome("silent", { idleTimeoutMs: 300 })).toBe("ETIMEDOUT true the server went silent for 0.3 s (set GROVE_IDLE_TIMEOUT to wait longer)")
      expect(await outcome("whole", {
        stream: () => ({
          part: () => {
            throw Object.assign(new Error("bad frame"), { code: "BAD" })
          },
          done: () => {}
        })
      })).toBe("BAD true bad frame")
      const controller = new AbortController()
      const aborted = outcome("silent", { signal: controller.signal })
      setTimeout(() => controller.abort(), 50)
      expect(await aborted).toMatch(/^ABORT_ERR true/)
      // The consumer takes 600 ms over its first part, twice the idle bound: its time is not the server's silence.
      let first = true
      expect(await outcome("slow", {
        idleTimeoutMs: 300,
        stream: () => ({
          part: () => {
            if (!first) return undefined
            first = false
            return new Promise<void>((resolve) => setTimeout(resolve, 600))
          },
          done: () => {}
        })
      })).toBe("answered")
      const refused = await sendStreamed(`http://127.0.0.1:${await Effect.runPromise(closedPort)}/x`, { method: "POST", stream: () => take }).catch((error) => error)
      expect([refused.code, refused.connected]).toEqual(["ECONNREFUSED", false])
    } finally {
      await server.close()
    }
  })

  it("takes one read per turn of the event loop, so a signal's abort (or any timer) gets in while a fast answer streams", async () => {
    // O's M1 on 2ae6832: libuv reads a socket again at once after a full read (up to 32 times, 8 MiB here), so a
    // Ctrl-C waited for that much of the answer to be placed (seconds in a 5k-file clone) before its abort ran.
    const body = bodyOf(24 * 1024 * 1024, 5)
    const server = await rawServer((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`)
      socket.write(body)
    })
    try {
      let turn = 0
      let counting = true
      const tick = () => {
        turn++
        if (counting) setImmediate(tick)
      }
      setImmediate(tick)
      const perTurn = new Map<number, number>()
      let parts = 0
      const controller = new AbortController()
      const failed = await sendStreamed(server.url, {
        method: "POST",
        body: "{}",
        signal: controller.signal,
        stream: () => ({
          part: () => {
            // The first part takes its time, as a clone's placing does: the kernel holds megabytes of the answer meanwhile.
            const until = performance.now() + (parts++ === 0 ? 300 : 0.2)
            while (performance.now() < until);
            perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1)
            if (parts === 40) setTimeout(() => controller.abort(), 0)
            return undefined
          },
          done: () => {}
        })
      }).then(() => "answered", (error: Error) => error.name)
      counting = false
      expect({ failed, most: Math.max(...perTurn.values()), afterAbort: parts - 40 })
        .toEqual({ failed: "AbortError", most: expect.toSatisfy((n: number) => n <= 2), afterAbort: expect.toSatisfy((n: number) => n <= 4) })
    } finally {
      await server.close()
    }
  })

  it("takes http:// only, and not where node may send through a proxy or GROVE_STREAM_SOCKET=0 says no", () => {
    expect(streamsOverSocket("http://127.0.0.1:1/api/o/r", {}, [])).toBe(true)
    expect(streamsOverSocket("https://grove.example/api/o/r", {}, [])).toBe(false)
    expect(streamsOverSocket("http://127.0.0.1:1/api/o/r", { GROVE_STREAM_SOCKET: "0" }, [])).toBe(false)
    expect(streamsOverSocket("http://h/api/o/r", { NODE_USE_ENV_PROXY: "1", HTTP_PROXY: "http://proxy:3128" }, [])).toBe(false)
    expect(streamsOverSocket("http://h/api/o/r", { http_proxy: "http://proxy:3128" }, ["--use-env-proxy"])).toBe(false)
    expect(streamsOverSocket("http://h/api/o/r", { NODE_OPTIONS: "--max-old-space-size=512 --use-env-proxy", HTTP_PROXY: "http://proxy:3128" }, [])).toBe(false)
    // A proxy variable node does not use (no NODE_USE_ENV_PROXY): node:http would connect directly too.
    expect(streamsOverSocket("http://h/api/o/r", { HTTP_PROXY: "http://proxy:3128" }, [])).toBe(true)
  })
})
