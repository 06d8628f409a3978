/**
 * An HTTP proxy on 127.0.0.1 in front of one server that keeps every request
 * (method, path, the body as received, the response status and headers), so a
 * suite can check what a client really put on the wire: which routes, which
 * chunk frames, compressed or not.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface Recorded {
  readonly method: string
  readonly path: string
  readonly body: Buffer
  readonly status: number
  readonly responseHeaders: http.IncomingHttpHeaders
  readonly requestHeaders: http.IncomingHttpHeaders
}

export interface RecordingProxy {
  readonly url: string
  /** The requests answered since the last `take` (or the start), oldest first; forgets them. */
  readonly take: () => Array<Recorded>
  readonly close: () => Promise<void>
}

export const startRecordingProxy = (upstream: string): Promise<RecordingProxy> => {
  const target = new URL(upstream)
  const agent = new http.Agent({ keepAlive: true })
  let log: Array<Recorded> = []
  const server = http.createServer((req, res) => {
    const pieces: Array<Buffer> = []
    req.on("data", (d: Buffer) => pieces.push(d))
    req.on("end", () => {
      const body = Buffer.concat(pieces)
      const forward = http.request(
        { hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
          // Recorded once the answer is complete: a client that saw the end sees the record.
          answer.on("end", () =>
            log.push({ method: req.method ?? "GET", path: req.url ?? "/", body, status: answer.statusCode ?? 0, responseHeaders: answer.headers, requestHeaders: req.headers }))
          answer.pipe(res)
        }
      )
      forward.on("error", (error) => {
        if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" })
        res.end(`proxy: ${error.message}`)
      })
      forward.end(body)
    })
  })
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        take: () => {
          const out = log
          log = []
          return out
        },
        close: () =>
          new Promise<void>((done) => {
            agent.destroy()
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}
