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
}, 300_000)

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
const sendLarge = (
  path: string,
  size: number,
  options: { chunked?: boolean; token?: string; contentType?: string; method?: string } = {}
) =>
  new Promise<Sent>((resolve, reject) => {
    const url = new URL(path, server.url)
    const headers: http.OutgoingHttpHeaders = { "content-type": options.contentType ?? "application/json" }
    if (options.chunked !== true) headers["content-length"] = String(size)
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
    const request = http.request(url, { method: options.method ?? "POST", headers, agent: false })
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

describe("the routes with large bodies check access before reading a byte (issue 20, item 4)", () => {
  const LARGE = 100 * 1000 * 1000

  /** Sends 100 MB anonymously (or with `token`) and checks the refusal came at once, the body unread. */
  const refusedUnread = async (path: string, options: { chunked?: boolean; token?: string }, status: number) => {
    const pid = server.process.pid!
    const before = rssBytes(pid)
    const started = Date.now()
    const sent = await sendLarge(path, LARGE, options)
    const elapsed = Date.now() - started
    const growth = rssBytes(pid) - before
    console.log(
      `${path} ${options.chunked === true ? "chunked" : "Content-Length"}: ${sent.status} after ${elapsed} ms, ` +
        `${(sent.written / MiB).toFixed(1)} MiB written, server RSS growth ${(growth / MiB).toFixed(2)} MiB`
    )
    expect(sent.status, JSON.stringify(sent.body)).toBe(status)
    expect(isErrorBody(sent.body)).toBe(true)
    expect(sent.headers.connection).toBe("close")
    // The server read nothing: what was written is what the sockets' buffers took (a few MiB).
    expect(sent.written).toBeLessThan(32 * MiB)
    // Refused at once (2 s on a loaded machine; about 10 ms alone).
    expect(elapsed).toBeLessThan(2_000)
    expect(growth).toBeLessThan(8 * MiB)
    return sent
  }

  it("refuses an anonymous 100 MB push to a missing repository with 404, Content-Length or chunked, push and staged-v1", async () => {
    // Warm up the refusal's path (token lookup, repository lookup) so the measurement sees the body only.
    for (let i = 0; i < 3; i++) await sendLarge("/api/nobody/none/push", 2 * MiB)
    for (const path of ["/api/nobody/none/push", "/api/nobody/none/push/staged-v1"]) {
      for (const chunked of [false, true]) {
        const sent = await refusedUnread(path, { chunked }, 404)
        expect(sent.body.code).toBe("not_found")
      }
    }
  })

  it("refuses a 100 MB push by a caller who cannot write: anonymous 401 on a public repository, a stranger 404 on a private one", async () => {
    const a = api(server.url, alice)
    expect((await a.post("/repos", { name: "guarded-public", is_public: true })).status).toBe(201)
    expect((await a.post("/repos", { name: "guarded-private" })).status).toBe(201)
    const stranger = await server.createUser("stranger")
    for (const path of ["/api/alice/guarded-public/push", "/api/alice/guarded-public/push/staged-v1"]) {
      for (const chunked of [false, true]) await refusedUnread(path, { chunked }, 401)
    }
    for (const path of ["/api/alice/guarded-private/push", "/api/alice/guarded-private/push/staged-v1"]) {
      for (const chunked of [false, true]) await refusedUnread(path, { chunked, token: stranger }, 404)
    }
    // An invalid token is refused before the body too.
    await refusedUnread("/api/alice/guarded-private/push", { token: "grove_not-a-real-token" }, 401)
  })

  it("refuses the other large routes the same way: chunk upload, chunk batch, blobs/info, proof pages", async () => {
    const hash = "a".repeat(64)
    const token = "t".repeat(32)
    for (const path of [`/api/nobody/none/chunks/batch`, "/api/nobody/none/blobs/info"]) {
      await refusedUnread(path, { chunked: true }, 404)
    }
    // PUT routes, over the same helper's socket (method aside, the same request).
    for (const path of [`/api/nobody/none/chunks/${hash}`, `/api/nobody/none/blobs/proofs/${token}/mappings`]) {
      const sent = await sendLarge(path, LARGE, { method: "PUT", chunked: true })
      expect(sent.status, path).toBe(404)
      expect(sent.written, path).toBeLessThan(32 * MiB)
    }
    // A malformed owner answers the route's 400 before the body as well.
    const bad = await sendLarge("/api/-bad-/none/push", LARGE)
    expect(bad.status).toBe(400)
    expect(bad.body.code).toBe("invalid_input")
    expect(bad.written).toBeLessThan(32 * MiB)
  })

  it("still lets a writer's push through to the handler", async () => {
    // 2 MiB of junk from the owner reaches the handler: a 400 for the body, not an access refusal.
    const push = await sendLarge("/api/alice/guarded-private/push", 2 * MiB, { token: alice })
    expect(push.status).toBe(400)
    expect(push.body.code).toBe("invalid_request")
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
    const names = all.body.repos.map((r: { name: string }) => r.name)
    expect(names).toEqual(expect.arrayContaining(["page-a", "page-e"]))
    expect(all.headers.get("x-next-cursor")).toBeNull()
    const seen: Array<string> = []
    let next: string | null = "/repos?limit=2"
    while (next !== null) {
      const page = await a.get(next)
      expect(page.status).toBe(200)
      expect(page.body.repos.length).toBeLessThanOrEqual(2)
      seen.push(...page.body.repos.map((r: { name: string }) => r.name))
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

/**
 * Follows X-Next-Cursor (checking Link names the same cursor) from `path` with `limit`, and answers
 * every item seen, page by page.
 */
/** The items of a list's body: the envelope's one array (`{repos}`, `{organizations}`, ...). */
const itemsOf = (body: any): Array<any> => Object.values(body).find(Array.isArray) as Array<any>

const pageThrough = async (token: string, path: string, limit: number, items: (body: any) => Array<any> = itemsOf) => {
  const a = api(server.url, token)
  const pages: Array<Array<any>> = []
  const separator = path.includes("?") ? "&" : "?"
  let next: string | null = `${path}${separator}limit=${limit}`
  while (next !== null) {
    const page = await a.get(next)
    expect(page.status, next).toBe(200)
    const got = items(page.body)
    expect(got.length).toBeLessThanOrEqual(limit)
    pages.push(got)
    const cursor = page.headers.get("x-next-cursor")
    if (cursor !== null) {
      expect(got.length).toBe(limit)
      expect(page.headers.get("link")).toContain(`cursor=${cursor}`)
      expect(page.headers.get("link")).toContain(`limit=${limit}`)
    }
    next = cursor === null ? null : `${path}${separator}limit=${limit}&cursor=${cursor}`
    expect(pages.length).toBeLessThan(100)
  }
  return { pages, all: pages.flat() }
}

const cursorOf = (key: unknown) => Buffer.from(JSON.stringify(key)).toString("base64url")

const nonIncreasing = (values: Array<string>) => values.every((v, i) => i === 0 || Date.parse(values[i - 1]!) >= Date.parse(v))

describe("paging through lists longer than a page (keyset in SQL)", () => {
  let bob: string
  beforeAll(async () => {
    bob = await server.createUser("pager")
  })

  it("api-keys: every key once, oldest first", async () => {
    const b = api(server.url, bob)
    for (let i = 0; i < 7; i++) expect((await b.post("/api-keys", { name: `key-${i}` })).status).toBe(201)
    const whole = (await b.get("/api-keys")).body.api_keys as Array<{ id: string; created_at: string }>
    expect(whole.length).toBeGreaterThanOrEqual(7)
    for (const limit of [1, 2, 3]) {
      const { all, pages } = await pageThrough(bob, "/api-keys", limit)
      expect(all.map((k) => k.id)).toEqual(whole.map((k) => k.id))
      expect(new Set(all.map((k) => k.id)).size).toBe(all.length)
      expect(pages.length).toBe(Math.ceil(whole.length / limit))
    }
    expect(whole.every((k, i) => i === 0 || Date.parse(whole[i - 1]!.created_at) <= Date.parse(k.created_at))).toBe(true)
    // A cursor that is not one of this list's keys is refused before it reaches the database.
    for (const bad of [["2026-02-30 00:00:00+00", whole[0]!.id], ["2026-01-01 00:00:00+00", "not-a-uuid"], [whole[0]!.created_at], ["x", "y", "z"]]) {
      const reply = await b.get(`/api-keys?cursor=${cursorOf(bad)}`)
      expect(reply.status, JSON.stringify(bad)).toBe(400)
      expect(reply.body.code).toBe("invalid_cursor")
    }
    // The empty key is every list's start.
    expect((await b.get(`/api-keys?cursor=${cursorOf([])}`)).body.api_keys.map((k: { id: string }) => k.id)).toEqual(whole.map((k) => k.id))
  })

  it("orgs: every organization once, by slug", async () => {
    const b = api(server.url, bob)
    for (const slug of ["pgorgd", "pgorgb", "pgorgf", "pgorga", "pgorge", "pgorgc"]) {
      expect((await b.post("/orgs", { slug, name: slug })).status).toBe(201)
    }
    const whole = ((await b.get("/orgs")).body.organizations as Array<{ slug: string }>).map((o) => o.slug)
    expect(whole).toEqual([...whole].sort())
    expect(whole).toEqual(expect.arrayContaining(["pgorga", "pgorgf", "pager"]))
    for (const limit of [1, 2, 4]) {
      const { all } = await pageThrough(bob, "/orgs", limit)
      expect(all.map((o) => o.slug)).toEqual(whole)
    }
  })

  it("repos: every repository once, in each sort's order", async () => {
    const b = api(server.url, bob)
    for (const name of ["Zeta", "alpha", "Mid", "beta", "omega", "Gamma", "delta"]) {
      expect((await b.post("/repos", { name })).status).toBe(201)
    }
    expect((await b.post("/repos", { name: "in-org", organization_slug: "pgorgc" })).status).toBe(201)
    // A later write may move a repository up the updated order.
    expect((await b.patch("/pager/alpha/visibility", { is_public: true })).status).toBe(200)
    for (const sort of [undefined, "name", "updated", "created"] as const) {
      const path = sort === undefined ? "/repos" : `/repos?sort=${sort}`
      const whole = (await b.get(path)).body.repos as Array<{ id: string; owner: string; name: string; created_at: string; updated_at: string }>
      expect(whole.length).toBeGreaterThanOrEqual(8)
      if (sort === undefined || sort === "name") {
        const keys = whole.map((r) => [r.owner, r.name.toLowerCase()] as const)
        expect(keys).toEqual([...keys].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0)))
      } else {
        expect(nonIncreasing(whole.map((r) => sort === "updated" ? r.updated_at : r.created_at))).toBe(true)
      }
      for (const limit of [1, 3]) {
        const { all } = await pageThrough(bob, path, limit)
        expect(all.map((r) => r.id), `${path} limit ${limit}`).toEqual(whole.map((r) => r.id))
      }
    }
    // A cursor of one sort is not one of another's.
    const first = await b.get("/repos?sort=name&limit=1")
    expect((await b.get(`/repos?sort=created&cursor=${first.headers.get("x-next-cursor")}`)).status).toBe(400)
  })

  it("branches: every branch once, main first then the most recently updated, also with a status", async () => {
    const b = api(server.url, bob)
    expect((await b.post("/repos", { name: "many-branches" })).status).toBe(201)
    for (const name of ["b1", "b2", "b3", "b4", "b5", "b6", "b7"]) {
      expect((await b.post("/pager/many-branches/branches", { name })).status).toBe(201)
    }
    for (const status of [undefined, "open"] as const) {
      const path = status === undefined ? "/pager/many-branches/branches" : `/pager/many-branches/branches?status=${status}`
      const whole = (await b.get(path)).body.branches as Array<{ name: string; updated_at: string }>
      expect(whole.length).toBe(8)
      expect(whole[0]!.name).toBe("main")
      expect(nonIncreasing(whole.slice(1).map((x) => x.updated_at))).toBe(true)
      expect(whole.slice(1).map((x) => x.name).sort()).toEqual(["b1", "b2", "b3", "b4", "b5", "b6", "b7"])
      for (const limit of [1, 3]) {
        const { all } = await pageThrough(bob, path, limit, (body) => body.branches)
        expect(all.map((x) => x.name), `${path} limit ${limit}`).toEqual(whole.map((x) => x.name))
      }
    }
    expect((await b.get("/pager/many-branches/branches?status=closed&limit=1")).body.branches).toEqual([])
    expect((await b.get(`/pager/many-branches/branches?cursor=${cursorOf([true, "2026-01-01 00:00:00", "x\u0000"])}`)).status).toBe(400)
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
