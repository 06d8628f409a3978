/**
 * A counting HTTP proxy on 127.0.0.1: forwards every request to one upstream
 * and records method, path, status, body bytes each way and timings. In
 * `POST .../chunks/batch` bodies it also counts the frames (u32 hash length,
 * hash, u32 data length, data; or grove's bare frames, u32 length and data),
 * i.e. the chunks uploaded. Both git and grove go through one, so they pay the same hop.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as zlib from "node:zlib"

export interface Exchange {
  readonly method: string
  readonly path: string
  status: number
  requestBytes: number
  responseBytes: number
  /** Chunk frames in a chunks/batch body, 1 for a PUT chunks/{hash}, else 0. */
  chunks: number
  readonly start: number
  end: number
}

export interface Proxy {
  readonly url: string
  readonly log: Array<Exchange>
  /** The exchanges recorded since `mark` was taken. */
  readonly mark: () => () => Array<Exchange>
  readonly close: () => Promise<void>
}

/** The content type of a batch of bare frames (core's Frames.BARE_CONTENT_TYPE: no hash, bit 31 of the length says zstd). */
const BARE_CONTENT_TYPE = "application/vnd.grove.chunk-frames.bare-v1"

/** Counts frames in a stream of chunks/batch body pieces without keeping the data. */
const frameCounter = (bare: boolean) => {
  let frames = 0
  let header: Array<number> = []
  const first = bare ? "dataLength" : "hashLength"
  let state: "hashLength" | "hash" | "dataLength" | "data" = first
  let need = 4
  const u32 = () => ((header[0]! << 24) | (header[1]! << 16) | (header[2]! << 8) | header[3]!) >>> 0
  return {
    push: (piece: Uint8Array) => {
      let i = 0
      while (i < piece.length) {
        if (state === "data" || state === "hash") {
          const take = Math.min(need, piece.length - i)
          i += take
          need -= take
          if (need > 0) continue
          if (state === "hash") { state = "dataLength"; need = 4; header = [] }
          else { state = first; need = 4; header = [] }
          continue
        }
        header.push(piece[i]!)
        i++
        if (header.length < need) continue
        const value = u32()
        header = []
        if (state === "hashLength") { state = "hash"; need = value }
        else {
          frames++
          state = "data"
          need = bare ? value & 0x7fff_ffff : value
          if (need === 0) { state = first; need = 4 }
        }
      }
    },
    frames: () => frames
  }
}

/**
 * `keepHost`: the upstream sees the Host the client asked for (this proxy), for servers that build
 * links from Host alone (the Oak client's reference server), so their links come back through here too.
 */
export const startProxy = (upstream: string, options: { readonly keepHost?: boolean } = {}): Promise<Proxy> => {
  const target = new URL(upstream)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
  const log: Array<Exchange> = []
  const server = http.createServer((req, res) => {
    const exchange: Exchange = {
      method: req.method ?? "GET",
      path: req.url ?? "/",
      status: 0,
      requestBytes: 0,
      responseBytes: 0,
      chunks: 0,
      start: performance.now(),
      end: 0
    }
    log.push(exchange)
    const counter = exchange.method === "POST" && /\/chunks\/batch(\?|$)/.test(exchange.path)
      ? frameCounter(req.headers["content-type"] === BARE_CONTENT_TYPE)
      : undefined
    if (exchange.method === "PUT" && /\/chunks\/[0-9a-f]{16,}(\?|$)/.test(exchange.path)) exchange.chunks = 1
    // X-Forwarded-Host: links the server hands out (the Oak client's chunk links) come back through here too.
    const headers = options.keepHost === true ? req.headers : { ...req.headers, host: target.host, "x-forwarded-host": req.headers.host }
    const forward = http.request(
      { hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent },
      (answer) => {
        exchange.status = answer.statusCode ?? 0
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
        answer.on("data", (d: Buffer) => (exchange.responseBytes += d.length))
        answer.on("end", () => (exchange.end = performance.now()))
        answer.pipe(res)
      }
    )
    forward.on("error", (error) => {
      exchange.status = 502
      exchange.end = performance.now()
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" })
      res.end(`proxy: ${error.message}`)
    })
    // A zstd batch (the body_compression capability) is counted in its plain frames.
    const plain = counter !== undefined && req.headers["content-encoding"] === "zstd" ? zlib.createZstdDecompress() : undefined
    plain?.on("data", (d: Buffer) => counter?.push(d))
    plain?.on("end", () => (exchange.chunks = counter!.frames()))
    plain?.on("error", () => {})
    req.on("data", (d: Buffer) => {
      exchange.requestBytes += d.length
      if (plain !== undefined) plain.write(d)
      else counter?.push(d)
    })
    req.on("end", () => {
      if (plain !== undefined) plain.end()
      else if (counter !== undefined) exchange.chunks = counter.frames()
    })
    req.pipe(forward)
  })
  server.keepAliveTimeout = 30_000
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        log,
        mark: () => {
          const from = log.length
          return () => log.slice(from)
        },
        close: () =>
          new Promise<void>((r) => {
            agent.destroy()
            server.closeAllConnections()
            server.close(() => r())
          })
      })
    })
  })
}
