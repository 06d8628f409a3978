/**
 * A webhook receiver on 127.0.0.1 for end-to-end suites: it keeps every request's headers and raw
 * body bytes, answers per path (a path can be told to fail its first N requests, or to be slow),
 * and verifies signatures the way a receiver in another language would, with
 * `openssl dgst -sha256 -hmac` over the bytes as received.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"

export interface Received {
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly raw: Buffer
  readonly at: number
}

export interface Receiver {
  readonly port: number
  readonly received: Array<Received>
  /** The first `times` requests to `path` answer `status`. */
  readonly failFirst: (path: string, times: number, status?: number) => void
  /** Requests to `path` are answered after `ms`. */
  readonly slow: (path: string, ms: number) => void
  readonly close: () => Promise<void>
}

export const startReceiver = async (): Promise<Receiver> => {
  const received: Array<Received> = []
  const failures = new Map<string, { left: number; status: number }>()
  const delays = new Map<string, number>()
  const server = http.createServer((request, response) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => {
      const url = request.url ?? "/"
      received.push({ path: url, headers: request.headers, raw: Buffer.concat(parts), at: Date.now() })
      const answer = () => {
        const failure = failures.get(url)
        if (failure !== undefined && failure.left > 0) {
          failure.left--
          response.writeHead(failure.status).end("not now")
          return
        }
        response.writeHead(204).end()
      }
      const delay = delays.get(url)
      if (delay === undefined) answer()
      else setTimeout(answer, delay)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    port: (server.address() as { port: number }).port,
    received,
    failFirst: (p, times, status = 500) => failures.set(p, { left: times, status }),
    slow: (p, ms) => delays.set(p, ms),
    close: () => new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
}

/** `sha256=<hex>` as openssl computes it over `data` with `secret`. */
export const opensslHmac = (secret: string, data: Buffer): string => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "grove-hmac-")), "body")
  fs.writeFileSync(file, data)
  try {
    const out = execFileSync("openssl", ["dgst", "-sha256", "-hmac", secret, file], { encoding: "utf8" })
    return `sha256=${out.trim().split(/\s+/).pop()}`
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true })
  }
}
