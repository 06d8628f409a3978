/**
 * Organization sites end to end against the real server: the settings (`GET/PUT/DELETE
 * /api/orgs/{slug}/site`, `GET /api/sites`) with their access rules and audit rows; serving main's
 * files by path (`/sites/<org>/…`) and by host (`<org>.sites.test`, sent as the Host header).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as http from "node:http"
import { brotliDecompressSync, gunzipSync } from "node:zlib"
import { type Built, buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let main: { head: string; snapshot: Built["snapshot"] }

const LONG = "<p>" + "a site page with enough text to be worth compressing. ".repeat(40) + "</p>\n"
const FILES: Record<string, string> = {
  "docs/index.html": "<h1>home v1</h1>\n",
  "docs/404.html": "<h1>lost</h1>\n",
  "docs/style.css": "body { color: green }\n",
  "docs/guide/index.html": LONG,
  "docs/secret/key.txt": "withheld\n",
  "outside.txt": "not part of the site\n",
  ".oak/PERMISSIONS": "/docs/secret/ @olga\n"
}

/** Pushes a branch with this commit and merges it into main; main's new head and files. */
const merge = async (commit: Built) => {
  const branch = commit.commit.branch_name
  const pushed = await as("olga").post("/acme/www/push", pushBody({ branch, commits: [commit], description: branch }))
  expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
  const merged = await as("olga").post(`/acme/www/branches/${branch}/merge`)
  expect(merged.status, JSON.stringify(merged.body)).toBe(200)
  return { head: merged.body.commit_hash as string, snapshot: commit.snapshot }
}

interface Raw {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
}

/** A GET with any headers (Host included, which fetch may not set), the body as sent (not decompressed). */
const get = (path: string, headers: Record<string, string> = {}) =>
  new Promise<Raw>((resolve, reject) => {
    const url = new URL(server.url)
    const request = http.request({ host: url.hostname, port: url.port, path, headers }, (response) => {
      const parts: Array<Buffer> = []
      response.on("data", (part: Buffer) => parts.push(part))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(parts) }))
      response.on("error", reject)
    })
    request.on("error", reject)
    request.end()
  })
const tokens: Record<string, string> = {}
const as = (user?: string) => api(server.url, user === undefined ? undefined : tokens[user])

beforeAll(async () => {
  server = await startServer({ args: ["--sites-domain", "sites.test"] })
  for (const user of ["olga", "adam", "mia", "zed"]) tokens[user] = await server.createUser(user)
  expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "adam", role: "admin" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "mia" })).status).toBe(201)
  expect((await as("olga").post("/repos", { name: "www", organization_slug: "acme", is_public: true })).status).toBe(201)
  expect((await as("olga").post("/repos", { name: "vault", organization_slug: "acme", is_public: false })).status).toBe(201)
  expect((await as("zed").post("/orgs", { slug: "zorg", name: "Zorg" })).status).toBe(201)
  expect((await as("zed").post("/repos", { name: "hidden", organization_slug: "zorg", is_public: false })).status).toBe(201)
  main = await merge(buildCommit({ branch: "setup", files: FILES }))
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("site settings", () => {
  it("refuses bad settings: no repo, an unknown repo, another org's repo, a source_dir that climbs out", async () => {
    const cases: Array<[unknown, number]> = [
      [{}, 400],
      [{ source_dir: "docs" }, 400],
      [{ repo: "nope" }, 404],
      [{ repo: "zorg/hidden" }, 400],
      [{ repo: "www", source_dir: "../x" }, 400],
      [{ repo: "www", source_dir: "docs/../../etc" }, 400],
      [{ repo: "www", branch: "dev" }, 400],
      [{ repo: "www", extra: 1 }, 400],
      ["not json", 400]
    ]
    for (const [body, status] of cases) {
      const reply = await as("olga").put("/orgs/acme/site", body)
      expect(reply.status, JSON.stringify([body, reply.body])).toBe(status)
      expect(isErrorBody(reply.body), JSON.stringify(reply.body)).toBe(true)
    }
    expect((await as().get("/orgs/acme/site")).status).toBe(404)
  })

  it("a plain member gets 403, a non-member and an anonymous caller never learn of the organization", async () => {
    expect((await as("mia").put("/orgs/acme/site", { repo: "www" })).status).toBe(403)
    expect((await as("mia").delete("/orgs/acme/site")).status).toBe(403)
    expect((await as("zed").put("/orgs/acme/site", { repo: "www" })).status).toBe(404)
    expect([401, 404]).toContain((await as().put("/orgs/acme/site", { repo: "www" })).status)
  })

  it("an admin publishes a public repository; its settings are public, listed and audited", async () => {
    const put = await as("adam").put("/orgs/acme/site", { repo: "acme/www", source_dir: "/docs/" })
    expect(put.status, JSON.stringify(put.body)).toBe(200)
    expect(put.body).toMatchObject({ organization_slug: "acme", repo_name: "www", branch: "main", source_dir: "/docs", url: "http://acme.sites.test/" })
    expect(Date.parse(put.body.created_at)).not.toBeNaN()
    const anonymous = await as().get("/orgs/acme/site")
    expect(anonymous.status).toBe(200)
    expect(anonymous.body).toEqual(put.body)
    expect((await as("zed").get("/sites")).body.sites.map((s: { organization_slug: string }) => s.organization_slug)).toEqual(["acme"])
    const again = await as("olga").put("/orgs/acme/site", { repo: "www" })
    expect(again.body.source_dir).toBe("/")
    expect(again.body.created_at).toBe(put.body.created_at)
    const entries = (await as("olga").get("/orgs/acme/audit")).body.entries as Array<{ action: string; actor: string }>
    expect(entries.filter((e) => e.action === "site.set").map((e) => e.actor)).toEqual(["olga", "adam"])
  })

  it("a site of a private repository is hidden from all but the organization's members", async () => {
    expect((await as("zed").put("/orgs/zorg/site", { repo: "hidden" })).status).toBe(200)
    expect((await as().get("/orgs/zorg/site")).status).toBe(404)
    expect((await as("olga").get("/orgs/zorg/site")).status).toBe(404)
    expect((await as("zed").get("/orgs/zorg/site")).status).toBe(200)
    expect((await as("olga").get("/sites")).body.sites.map((s: { organization_slug: string }) => s.organization_slug)).toEqual(["acme"])
    expect((await as("zed").get("/sites")).body.sites.map((s: { organization_slug: string }) => s.organization_slug)).toEqual(["acme", "zorg"])
    expect((await as().get("/sites")).body.sites.length).toBe(1)
  })

  it("DELETE disables the site (204, audited); a second DELETE is 404", async () => {
    expect((await as("zed").delete("/orgs/zorg/site")).status).toBe(204)
    expect((await as("zed").get("/orgs/zorg/site")).status).toBe(404)
    expect((await as("zed").delete("/orgs/zorg/site")).status).toBe(404)
    const entries = (await as("zed").get("/orgs/zorg/audit")).body.entries as Array<{ action: string }>
    expect(entries.map((e) => e.action)).toContain("site.delete")
  })
})

describe("serving", () => {
  beforeAll(async () => {
    const put = await as("olga").put("/orgs/acme/site", { repo: "www", source_dir: "docs" })
    expect(put.status, JSON.stringify(put.body)).toBe(200)
  })

  it("serves main's files under source_dir by path, index.html for directories, with the right type and a CSP sandbox", async () => {
    const home = await get("/sites/acme/")
    expect(home.status).toBe(200)
    expect(home.body.toString()).toBe("<h1>home v1</h1>\n")
    expect(home.headers["content-type"]).toBe("text/html; charset=utf-8")
    expect(home.headers["content-security-policy"]).toMatch(/^sandbox /)
    expect(home.headers["content-security-policy"]).not.toContain("allow-same-origin")
    expect(home.headers["etag"]).toBe(`"${main.snapshot.get("docs/index.html")!.hash}"`)
    const css = await get("/sites/acme/style.css")
    expect([css.status, css.headers["content-type"], css.body.toString()]).toEqual([200, "text/css; charset=utf-8", FILES["docs/style.css"]])
    expect((await get("/sites/acme/guide/")).body.toString()).toBe(LONG)
    const bare = await get("/sites/acme/guide")
    expect([bare.status, bare.headers["location"]]).toEqual([301, "/sites/acme/guide/"])
    expect((await get("/sites/acme")).headers["location"]).toBe("/sites/acme/")
  })

  it("answers 304 on If-None-Match, ranges with 206 (416 past the end), and gzip or brotli when accepted", async () => {
    const first = await get("/sites/acme/style.css")
    const again = await get("/sites/acme/style.css", { "if-none-match": first.headers["etag"] as string })
    expect([again.status, again.body.length, again.headers["etag"]]).toEqual([304, 0, first.headers["etag"]])
    expect((await get("/sites/acme/style.css", { "if-none-match": "\"other\"" })).status).toBe(200)
    const part = await get("/sites/acme/style.css", { range: "bytes=5-9" })
    expect([part.status, part.body.toString(), part.headers["content-range"]]).toEqual([206, FILES["docs/style.css"]!.slice(5, 10), `bytes 5-9/${FILES["docs/style.css"]!.length}`])
    expect((await get("/sites/acme/style.css", { range: "bytes=-4" })).body.toString()).toBe(FILES["docs/style.css"]!.slice(-4))
    expect((await get("/sites/acme/style.css", { range: "bytes=999-" })).status).toBe(416)
    const br = await get("/sites/acme/guide/", { "accept-encoding": "gzip, br" })
    expect(br.headers["content-encoding"]).toBe("br")
    expect(br.body.length).toBeLessThan(LONG.length / 4)
    expect(brotliDecompressSync(br.body).toString()).toBe(LONG)
    const gz = await get("/sites/acme/guide/", { "accept-encoding": "gzip" })
    expect(gz.headers["content-encoding"]).toBe("gzip")
    expect(gunzipSync(gz.body).toString()).toBe(LONG)
    expect((await get("/sites/acme/guide/")).headers["content-encoding"]).toBeUndefined()
  })

  it("serves the site's 404.html with status 404; no traversal out of source_dir; withheld files never served", async () => {
    const missing = await get("/sites/acme/nope.html")
    expect([missing.status, missing.body.toString()]).toEqual([404, "<h1>lost</h1>\n"])
    expect(missing.headers["content-security-policy"]).toMatch(/^sandbox /)
    for (const path of ["/sites/acme/..%2foutside.txt", "/sites/acme/%2e%2e/outside.txt", "/sites/acme/../outside.txt", "/sites/acme/guide/..%2F..%2Foutside.txt", "/sites/acme/%2e%2e%5coutside.txt"]) {
      const reply = await get(path)
      expect(reply.body.toString(), path).not.toContain("not part of the site")
      expect(reply.status, path).not.toBe(200)
    }
    // The same file is there for its reader through the API, so the 404 is the permission's.
    expect((await api(server.url, tokens.olga).get("/acme/www/raw/main/docs/secret/key.txt")).status).toBe(200)
    const withheld = await get("/sites/acme/secret/key.txt")
    expect([withheld.status, withheld.body.toString()]).toEqual([404, "<h1>lost</h1>\n"])
    expect((await get("/sites/nobody/")).status).toBe(404)
    expect((await get("/sites/zorg/")).status).toBe(404)
  })

  it("serves by host name under the sites domain, and nothing of the service there", async () => {
    const home = await get("/", { host: "acme.sites.test" })
    expect([home.status, home.body.toString()]).toEqual([200, "<h1>home v1</h1>\n"])
    expect(home.headers["content-security-policy"]).toMatch(/^sandbox /)
    expect((await get("/guide", { host: "ACME.sites.test:8080" })).headers["location"]).toBe("/guide/")
    const api = await get("/api/orgs/acme/site", { host: "acme.sites.test" })
    expect([api.status, api.body.toString()]).toEqual([404, "<h1>lost</h1>\n"])
    expect((await get("/", { host: "nobody.sites.test" })).status).toBe(404)
    // The service's own host still serves the service.
    expect((await get("/api/orgs/acme/site")).status).toBe(200)
  })

  it("shows a merge to main at once, and the new file's ETag", async () => {
    const before = await get("/sites/acme/")
    main = await merge(buildCommit({
      branch: "update",
      files: { ...FILES, "docs/index.html": "<h1>home v2</h1>\n" },
      parentHash: main.head,
      parentSnapshot: main.snapshot
    }))
    const after = await get("/sites/acme/", { "if-none-match": before.headers["etag"] as string })
    expect([after.status, after.body.toString()]).toEqual([200, "<h1>home v2</h1>\n"])
    expect(after.headers["etag"]).toBe(`"${main.snapshot.get("docs/index.html")!.hash}"`)
    expect((await get("/", { host: "acme.sites.test" })).body.toString()).toBe("<h1>home v2</h1>\n")
  })
})
