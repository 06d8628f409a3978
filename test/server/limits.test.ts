/**
 * Bounded input at the edge (issue 9, item 2): each route's body limit is enforced before any
 * work (413 JSON from Content-Length, or while a chunked body streams), unsupported media types
 * and methods answer 415 and 405 JSON, and refusing a 100 MB anonymous body costs the server
 * (a separate process) almost no memory.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as http from "node:http"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let alice: string

beforeAll(async () => {
  server = await startServer()
  alice = await server.createUser("alice")
}, 120_000)

afterAll(async () => {
  await server?.stop()
})

const MiB = 1024 * 1024

interface Sent {
  readonly status: number
  readonly body: any
  readonly headers: http.IncomingHttpHeaders
  /** Bytes written before the server answered (or closed the connection). */
  readonly written: number
}

/**
 * POSTs `size` bytes of JSON-looking filler, with a Content-Length or chunked, and resolves with
 * the server's answer as soon as it arrives (the rest of the body is then abandoned).
 */
const sendLarge = (path: string, size: number, options: { chunked?: boolean; token?: string; contentType?: string } = {}) =>
  new Promise<Sent>((resolve, reject) => {
    const url = new URL(path, server.url)
    const headers: http.OutgoingHttpHeaders = { "content-type": options.contentType ?? "application/json" }
    if (options.chunked !== true) headers["content-length"] = String(size)
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
    const request = http.request(url, { method: "POST", headers, agent: false })
    let written = 0
    let answered = false
    const piece = Buffer.alloc(64 * 1024, "[")
    request.on("response", (response) => {
      answered = true
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (d: string) => (text += d))
      response.on("end", () => {
        request.destroy()
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch {
          // keep the text
        }
        resolve({ status: response.statusCode ?? 0, body, headers: response.headers, written })
      })
    })
    // The server may close the connection while the body is still being sent: only its answer counts.
    request.on("error", (error) => {
      if (!answered) setTimeout(() => (answered ? undefined : reject(error)), 2_000)
    })
    const pump = () => {
      while (!answered && written < size && !request.destroyed) {
        const part = piece.subarray(0, Math.min(piece.length, size - written))
        written += part.length
        if (!request.write(part)) return void request.once("drain", pump)
      }
      if (!answered && written >= size && !request.destroyed) request.end()
    }
    pump()
  })

/** POSTs `body` as JSON in several chunks, without a Content-Length. */
const sendChunked = (path: string, body: string, token?: string) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { "content-type": "application/json" }
    if (token !== undefined) headers.authorization = `Bearer ${token}`
    const req = http.request(new URL(path, server.url), { method: "POST", headers, agent: false }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (d: string) => (text += d))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }))
    })
    req.on("error", reject)
    const middle = Math.floor(body.length / 2)
    req.write(body.slice(0, middle))
    setTimeout(() => req.end(body.slice(middle)), 20)
  })

/** A request fetch() will not send (TRACE), over node:http. */
const request = (method: string, path: string) =>
  new Promise<{ status: number; body: any; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    const req = http.request(new URL(path, server.url), { method, agent: false }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (d: string) => (text += d))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text), headers: response.headers }))
    })
    req.on("error", reject)
    req.end()
  })

/** The server process's resident set, from /proc (Linux). */
const rssBytes = (pid: number): number => {
  const match = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  if (match === null) throw new Error("no VmRSS")
  return Number(match[1]) * 1024
}

describe("body limits", () => {
  it("refuses an anonymous 100 MB POST /api/repos from its Content-Length with 413 JSON, without reading it", async () => {
    const pid = server.process.pid!
    // Warm up the paths the refusal takes, so the measurement sees only what the body costs.
    for (let i = 0; i < 3; i++) await sendLarge("/api/repos", 2 * MiB)
    const before = rssBytes(pid)
    const sent = await sendLarge("/api/repos", 100 * 1000 * 1000)
    const after = rssBytes(pid)
    expect(sent.status).toBe(413)
    expect(sent.body).toEqual({ error: "the request body must be at most 1048576 bytes", code: "payload_too_large" })
    expect(sent.written).toBeLessThan(100 * 1000 * 1000)
    const growth = after - before
    console.log(`server RSS ${(before / MiB).toFixed(1)} MiB -> ${(after / MiB).toFixed(1)} MiB (growth ${(growth / MiB).toFixed(2)} MiB) refusing a 100 MB body`)
    expect(growth).toBeLessThan(8 * MiB)
  })

  it("stops reading a chunked body past the route's limit: 413 JSON, with or without a token", async () => {
    const anonymous = await sendLarge("/api/alice/limits/commits/info", 3 * MiB, { chunked: true })
    expect(anonymous.status).toBe(413)
    expect(anonymous.body.code).toBe("payload_too_large")
    const signedIn = await sendLarge("/api/orgs", 3 * MiB, { chunked: true, token: alice })
    expect(signedIn.status).toBe(413)
    expect(signedIn.body.code).toBe("payload_too_large")
  })

  it("checks a chunked body against a small route's limit before the token: 413 for an invalid, a valid and no token", async () => {
    // An invalid token would be refused 401 by the token lookup: the limit is checked before it.
    const invalid = await sendLarge("/api/orgs", 3 * MiB, { chunked: true, token: "grove_not-a-real-token" })
    expect(invalid.status).toBe(413)
    expect(invalid.body).toEqual({ error: "the request body must be at most 1048576 bytes", code: "payload_too_large" })
    expect(invalid.headers["x-content-type-options"]).toBe("nosniff")
    const invalidRead = await sendLarge("/api/alice/limits/commits/info", 3 * MiB, { chunked: true, token: "grove_not-a-real-token" })
    expect(invalidRead.status).toBe(413)
    const valid = await sendLarge("/api/orgs", 3 * MiB, { chunked: true, token: alice })
    expect(valid.status).toBe(413)
    expect(valid.body.code).toBe("payload_too_large")
    const anonymous = await sendLarge("/api/orgs", 3 * MiB, { chunked: true })
    expect(anonymous.status).toBe(413)
    expect(anonymous.body.code).toBe("payload_too_large")
    // Within the limit, a chunked body read before the token reaches the handler whole.
    const small = await sendChunked("/api/orgs", JSON.stringify({ slug: "chunked-org", name: "Chunked" }), alice)
    expect(small.status, JSON.stringify(small.body)).toBe(201)
    expect(small.body.slug).toBe("chunked-org")
    expect((await sendChunked("/api/orgs", JSON.stringify({ slug: "chunked-org-2", name: "x" }), "grove_not-a-real-token")).status).toBe(401)
  })

  it("keeps small bodies working and the push route's large limit", async () => {
    const created = await api(server.url, alice).post("/repos", { name: "limits", description: "x".repeat(1000) })
    expect(created.status).toBe(201)
    // 2 MiB is past the small routes' limit but well within the push's: it reaches the handler (a 400 for junk).
    const push = await sendLarge("/api/alice/limits/push", 2 * MiB, { token: alice })
    expect(push.status).toBe(400)
    expect(push.body.code).not.toBe("payload_too_large")
  })

  it("refuses a sign-in form past 16 KiB without reading more of it", async () => {
    const sent = await sendLarge("/cli-auth", 64 * 1024, { contentType: "application/x-www-form-urlencoded" })
    expect(sent.status).toBe(413)
    expect(sent.body.code).toBe("payload_too_large")
    // Without a length, the read stops at the limit and the page answers 413 (not an empty form).
    const chunked = await sendLarge("/cli-auth", 64 * 1024, { contentType: "application/x-www-form-urlencoded", chunked: true })
    expect(chunked.status).toBe(413)
  })
})

describe("what /api/openapi.json promises", () => {
  it("declares the bearer scheme, per-operation security and 413/415; refuses undeclared body properties", async () => {
    const doc = (await api(server.url).get("/openapi.json")).body
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" })
    expect(doc.paths["/api/repos"].post.security).toEqual([{ bearer: [] }])
    expect(doc.paths["/api/repos"].get.security).toEqual([{ bearer: [] }, {}])
    expect(Object.keys(doc.paths["/api/repos"].post.responses)).toEqual(expect.arrayContaining(["413", "415"]))
    const a = api(server.url, alice)
    const extra = await a.post("/repos", { name: "extra-prop", surprise: true })
    expect(extra.status).toBe(400)
    expect(extra.body.error).toContain("surprise")
    const badName = await a.post("/orgs", { slug: "api-keys", name: "Reserved" })
    expect(badName.status).toBe(400)
    // Without a token, an operation that needs one answers 401 before its body is looked at.
    expect((await api(server.url).post("/repos", { name: "" })).status).toBe(401)
  })
})

describe("pagination", () => {
  it("pages every list with limit (at most 200) and a cursor, the next one in X-Next-Cursor and Link", async () => {
    const a = api(server.url, alice)
    for (const name of ["page-a", "page-b", "page-c", "page-d", "page-e"]) expect((await a.post("/repos", { name })).status).toBe(201)
    const all = await a.get("/repos")
    // Without limit, a client sees the whole list as before (up to the maximum page).
    const names = all.body.map((r: { name: string }) => r.name)
    expect(names).toEqual(expect.arrayContaining(["page-a", "page-e"]))
    expect(all.headers.get("x-next-cursor")).toBeNull()
    const seen: Array<string> = []
    let next: string | null = "/repos?limit=2"
    while (next !== null) {
      const page = await a.get(next)
      expect(page.status).toBe(200)
      expect(page.body.length).toBeLessThanOrEqual(2)
      seen.push(...page.body.map((r: { name: string }) => r.name))
      const cursor = page.headers.get("x-next-cursor")
      if (cursor !== null) expect(page.headers.get("link")).toContain(`cursor=${cursor}`)
      next = cursor === null ? null : `/repos?limit=2&cursor=${cursor}`
    }
    expect(seen).toEqual(names)
    for (const bad of ["/repos?limit=0", "/repos?limit=201", "/repos?limit=x", "/repos?cursor=%2F%2F", "/repos?cursor=bm9wZQ"]) {
      expect((await a.get(bad)).status, bad).toBe(400)
    }
    for (const list of ["/api-keys?limit=1", "/orgs?limit=1", "/alice/page-a/branches?limit=1"]) expect((await a.get(list)).status, list).toBe(200)
  })
})

describe("media types and methods", () => {
  it("answers 415 JSON for a body that is not application/json", async () => {
    for (const contentType of ["text/plain", "application/xml", "application/x-www-form-urlencoded"]) {
      const reply = await api(server.url, alice).raw("POST", "/repos", "name=x", { "content-type": contentType })
      expect(reply.status).toBe(415)
      expect(reply.body.code).toBe("unsupported_media_type")
      expect(isErrorBody(reply.body)).toBe(true)
    }
  })

  it("answers 405 JSON with Allow for TRACE and for methods a path does not support", async () => {
    const trace = await request("TRACE", "/api/version")
    expect(trace.status).toBe(405)
    expect(trace.body).toMatchObject({ code: "method_not_allowed" })
    expect(trace.headers.allow).toBe("GET, HEAD")
    expect((await request("TRACE", "/")).status).toBe(405)
    const put = await api(server.url, alice).raw("PUT", "/repos")
    expect(put.status).toBe(405)
    expect(put.headers.get("allow")).toBe("GET, HEAD, POST")
    expect(isErrorBody(put.body)).toBe(true)
    // Unknown paths stay 404.
    expect((await api(server.url).raw("PUT", "/no/such/route/here")).status).toBe(404)
  })
})
