/**
 * The fast read of `GET /api/{owner}/{name}` (packages/server/src/fast-reads/) answers exactly what the
 * app answers: the same requests go to a server with it on and to one with it off (GROVE_FAST_READS=0),
 * and every answer matches (status, headers but the date and the request id's value, body but the ids
 * and times each server made). Changes are seen by the very next request (access-cache.test.ts), and a
 * counter shows that the fast path did serve, so it cannot silently fall through always.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as http from "node:http"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

const METRICS_TOKEN = "fast-reads-metrics"
/** Organization sites answer at `<org>.sites.test`: the app routes those hosts to the site. */
const SITES_DOMAIN = "sites.test"

interface Side {
  readonly name: string
  readonly server: GroveServer
  readonly pam: string
  readonly sid: string
}

let on: Side
let off: Side

const startSide = async (name: string, env: NodeJS.ProcessEnv): Promise<Side> => {
  const server = await startServer({ env: { GROVE_SITES_DOMAIN: SITES_DOMAIN, ...env }, args: ["--metrics-token", METRICS_TOKEN] })
  return { name, server, pam: await server.createUser("pam"), sid: await server.createUser("sid") }
}

beforeAll(async () => {
  ;[on, off] = await Promise.all([startSide("on", {}), startSide("off", { GROVE_FAST_READS: "0" })])
}, 300_000)

afterAll(async () => {
  await Promise.all([on?.server.stop(), off?.server.stop()])
})

type Who = "pam" | "sid" | "anonymous" | { readonly token: string }
const tokenOf = (side: Side, who: Who) => who === "anonymous" ? undefined : who === "pam" ? side.pam : who === "sid" ? side.sid : who.token

/** One GET, normalized where the two servers legitimately differ. */
const read = async (side: Side, who: Who, path: string, headers: Record<string, string> = {}) => {
  const token = tokenOf(side, who)
  const response = await fetch(`${side.server.url}/api${path}`, {
    headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...headers }
  })
  const text = await response.text()
  const seen: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    if (name === "date") return
    seen[name] = name === "x-request-id" ? (/^[0-9a-f]{8}-[0-9a-z]+$/.test(value) ? "<id>" : value) : value
  })
  // Ids and times are each server's own; their lengths are fixed, so content-length still compares.
  const body = text.replace(/"(id|created_at|updated_at)":"[^"]*"/g, `"$1":"<$1>"`)
  return { status: response.status, headers: seen, body, text, requestId: response.headers.get("x-request-id") }
}

/** The same read on both servers, twice (the first may fill the caches); answers the fast side's last answer. */
const same = async (who: Who | ((side: Side) => Who), path: string, status: number, headers?: Record<string, string>) => {
  let last: Awaited<ReturnType<typeof read>> | undefined
  for (let i = 0; i < 3; i++) {
    const [a, b] = await Promise.all([on, off].map((side) => read(side, typeof who === "function" ? who(side) : who, path, headers)))
    expect(a!.status, `${path}: ${a!.text}`).toBe(status)
    expect({ status: a!.status, headers: a!.headers, body: a!.body }).toEqual({ status: b!.status, headers: b!.headers, body: b!.body })
    last = a
  }
  return last!
}

const both = (f: (side: Side) => Promise<void>) => Promise.all([f(on), f(off)])
const as = (side: Side, who: "pam" | "sid") => api(side.server.url, who === "pam" ? side.pam : side.sid)

/** The fast path's counter for a route template (the repository read's by default), from /metrics. */
const served = async (side: Side, route = "/api/:owner/:name"): Promise<number> => {
  const response = await fetch(`${side.server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
  const text = await response.text()
  const line = text.split("\n").find((l) => l.startsWith("grove_http_fast_reads_total{") && l.includes(`route="${route}"`))
  return line === undefined ? 0 : Number(line.split(" ").pop())
}

/**
 * A read the fast path served: read again until one moved the counter, at most a few times. The fast
 * path declines (rightly) when a 60 s boundary falls on a read (the key's last use comes due, a cache
 * entry expires), and the app then answers that one read; no other read runs meanwhile.
 */
const servedRead = async <A>(side: Side, what: string, once: (attempt: number) => Promise<A>) => {
  for (let attempt = 0; attempt < 3; attempt++) {
    const before = await served(side)
    const answer = await once(attempt)
    if (await served(side) > before) return answer
  }
  throw new Error(`the fast path did not serve ${what} in 3 reads`)
}
const fastRead = (side: Side, who: Who, path: string, headers?: Record<string, string>) =>
  servedRead(side, path, () => read(side, who, path, headers))

/** A GET with its own Host header (fetch sends the URL's). */
const readAtHost = (side: Side, who: Who, host: string, path: string) =>
  new Promise<{ readonly status: number; readonly body: string }>((resolve, reject) => {
    const url = new URL(`${side.server.url}/api${path}`)
    const token = tokenOf(side, who)
    const headers = { host, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) }
    http.get({ hostname: url.hostname, port: url.port, path: url.pathname, headers, agent: false }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (body += chunk))
      response.on("end", () => resolve({ status: response.statusCode!, body }))
      response.on("error", reject)
    }).on("error", reject)
  })

describe("fast reads: the same answers as the app", () => {
  it("public repository, anonymous; private repository, its owner; the fast path serves them", async () => {
    await both(async (side) => {
      expect((await as(side, "pam").post("/repos", { name: "open", is_public: true, description: "in the open" })).status).toBe(201)
      expect((await as(side, "pam").post("/repos", { name: "closed" })).status).toBe(201)
    })
    await same("anonymous", "/pam/open", 200)
    await same("pam", "/pam/closed", 200)
    await same("sid", "/pam/open", 200)
    // Warm: these reads are answered before the app.
    const answers = []
    for (let i = 0; i < 5; i++) answers.push(await fastRead(on, "pam", "/pam/closed"))
    expect(await served(off)).toBe(0)
    // An answer the app makes (a conditional request goes to it) has the very same bytes.
    const before = await served(on)
    const byApp = await read(on, "pam", "/pam/closed", { "if-none-match": "\"x\"" })
    expect(await served(on)).toBe(before)
    expect(byApp.text).toBe(answers[4]!.text)
    expect(byApp.headers).toEqual(answers[4]!.headers)
    // Each fast answer has its access-log line, with its own request id, route template and caller.
    const id = answers[4]!.requestId!
    const logged = await waitFor("the access-log line", async () => on.server.output().split("\n").find((l) => l.includes(`"request_id":"${id}"`)))
    expect(JSON.parse(logged)).toMatchObject({ method: "GET", route: "/api/:owner/:name", status: 200, bytes: answers[4]!.text.length, caller: "user:pam" })
    // A request id the client sent is echoed, as the app does.
    expect((await fastRead(on, "pam", "/pam/closed", { "x-request-id": "client-42" })).requestId).toBe("client-42")
  }, 120_000)

  it("private repository, a caller who is not a member: 404; a malformed and an unknown key: 401", async () => {
    await same("sid", "/pam/closed", 404)
    await same({ token: "grove_notarealkeynotarealkeynotarealkey0000" }, "/pam/closed", 401)
    await same({ token: "not-a-token" }, "/pam/open", 401)
    await same("anonymous", "/pam/nothing-here", 404)
  }, 120_000)

  it("a key revoked: 401 at once", async () => {
    const keys = new Map<Side, { id: string; key: string }>()
    await both(async (side) => {
      const created = await as(side, "pam").post("/api-keys", { name: "short-lived" })
      expect(created.status).toBe(201)
      keys.set(side, { id: created.body.id, key: created.body.key })
    })
    await same((side) => ({ token: keys.get(side)!.key }), "/pam/closed", 200)
    await both(async (side) => {
      expect((await as(side, "pam").delete(`/api-keys/${keys.get(side)!.id}`)).status).toBe(204)
    })
    await same((side) => ({ token: keys.get(side)!.key }), "/pam/closed", 401)
  }, 120_000)

  it("visibility changed, repository moved and deleted: seen by the next read", async () => {
    await same("sid", "/pam/open", 200)
    await both(async (side) => {
      expect((await as(side, "pam").patch("/pam/open/visibility", { is_public: false })).status).toBe(200)
    })
    await same("sid", "/pam/open", 404)
    await same("anonymous", "/pam/open", 404)
    await same("pam", "/pam/open", 200)

    await both(async (side) => {
      expect((await as(side, "pam").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
      expect((await as(side, "pam").post("/pam/open/transfer", { to_organization: "acme" })).status).toBe(200)
    })
    await same("pam", "/pam/open", 404)
    await same("pam", "/acme/open", 200)

    await both(async (side) => {
      expect((await as(side, "pam").delete("/acme/open")).status).toBe(204)
    })
    await same("pam", "/acme/open", 404)
  }, 120_000)

  it("the organization read: the same answers, and served fast", async () => {
    const before = await served(on, "/api/orgs/:slug")
    await same("pam", "/orgs/pam", 200)
    await same("pam", "/orgs/acme", 200)
    await same("sid", "/orgs/acme", 404)
    await same("anonymous", "/orgs/acme", 404)
    await same("pam", "/orgs/nobody", 404)
    expect(await served(on, "/api/orgs/:slug") - before).toBeGreaterThanOrEqual(3)
    expect(await served(off, "/api/orgs/:slug")).toBe(0)
    // A member's role shows once added: the next read sees it.
    await both(async (side) => {
      expect((await as(side, "pam").post("/orgs/acme/members", { username: "sid" })).status).toBe(201)
    })
    await same("sid", "/orgs/acme", 200)
  }, 120_000)

  it("unusual requests go to the app and answer the same", async () => {
    await same("pam", "/pam/closed?x=1", 200)
    await same("pam", "/pam/closed", 200, { accept: "text/html" })
    await same("pam", "/pam/closed", 200, { "if-modified-since": new Date().toUTCString() })
    await same("pam", "/pam/CLOSED", 200)
    await same("pam", "/pam/clo%73ed", 200)
  }, 120_000)

  it("a path is served whatever the Host (learned by path, so many Host values cannot switch it off); a site's host goes to the app", async () => {
    const learned = await fastRead(on, "pam", "/pam/closed")
    // Each attempt under a Host never seen before.
    const elsewhere = await servedRead(on, "/pam/closed at new hosts", (attempt) => readAtHost(on, "pam", `h${attempt}.example.test`, "/pam/closed"))
    expect(elsewhere).toEqual({ status: 200, body: learned.text })
    // An organization site's host: the app serves the site, whatever the path.
    const before = await served(on)
    const [site, siteOff] = await Promise.all([on, off].map((side) => readAtHost(side, "pam", `pam.${SITES_DOMAIN}`, "/pam/closed")))
    expect(await served(on)).toBe(before)
    expect(site).toEqual(siteOff)
    expect(site!.body).not.toContain("full_name")
  }, 120_000)
})
