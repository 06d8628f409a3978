/**
 * The git baseline's server: a tiny CGI host on 127.0.0.1 that runs
 * `git http-backend` for each request (GIT_PROJECT_ROOT, GIT_HTTP_EXPORT_ALL;
 * the bare repositories enable http.receivepack), streaming both bodies.
 */
import { spawn } from "node:child_process"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface GitHttp {
  readonly url: string
  readonly close: () => Promise<void>
}

const headerEnd = (data: Buffer): { at: number; length: number } | undefined => {
  const crlf = data.indexOf("\r\n\r\n")
  const lf = data.indexOf("\n\n")
  if (crlf >= 0 && (lf < 0 || crlf <= lf)) return { at: crlf, length: 4 }
  if (lf >= 0) return { at: lf, length: 2 }
  return undefined
}

export const startGitHttp = (projectRoot: string, baseEnv: NodeJS.ProcessEnv): Promise<GitHttp> => {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1")
    const env: NodeJS.ProcessEnv = {
      ...baseEnv,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: "1",
      REQUEST_METHOD: req.method ?? "GET",
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      REMOTE_ADDR: "127.0.0.1",
      SERVER_PROTOCOL: "HTTP/1.1"
    }
    if (req.headers["content-length"] !== undefined) env["CONTENT_LENGTH"] = req.headers["content-length"]
    if (req.headers["content-encoding"] !== undefined) env["HTTP_CONTENT_ENCODING"] = req.headers["content-encoding"]
    const protocol = req.headers["git-protocol"]
    if (typeof protocol === "string") env["GIT_PROTOCOL"] = protocol
    const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "pipe"] })
    let stderr = ""
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    child.stdin.on("error", () => { /* the backend may stop reading early */ })
    req.pipe(child.stdin)
    let head = Buffer.alloc(0)
    const onHead = (d: Buffer) => {
      head = Buffer.concat([head, d])
      const end = headerEnd(head)
      if (end === undefined) return
      child.stdout.off("data", onHead)
      child.stdout.pause()
      let status = 200
      const headers: Record<string, string> = {}
      for (const line of head.subarray(0, end.at).toString("latin1").split(/\r?\n/)) {
        const colon = line.indexOf(":")
        if (colon < 0) continue
        const name = line.slice(0, colon).trim()
        const value = line.slice(colon + 1).trim()
        if (name.toLowerCase() === "status") status = Number.parseInt(value, 10)
        else headers[name] = value
      }
      res.writeHead(status, headers)
      res.write(head.subarray(end.at + end.length))
      child.stdout.pipe(res)
    }
    child.stdout.on("data", onHead)
    child.on("close", (code) => {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain" })
        res.end(`git http-backend exited with ${code}: ${stderr}`)
      }
    })
    child.on("error", (error) => {
      if (!res.headersSent) res.writeHead(500)
      res.end(String(error))
    })
  })
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () => new Promise<void>((r) => {
          server.closeAllConnections()
          server.close(() => r())
        })
      })
    })
  })
}
