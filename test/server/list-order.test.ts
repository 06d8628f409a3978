/**
 * Every list in its documented order with more than ten items, walked page by page: numbers sort
 * as numbers (run 12 before run 9, a CI log's 12th piece after its 9th), times newest or oldest
 * first as documented, names by name. A text alias in ORDER BY once sorted CI runs 9, 8, ..., 3,
 * 22, 21, 20, 2, 19 and answered run 9 to `?limit=1`.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, type Reply } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

const N = 12
let server: GroveServer
let token: string
const as = () => api(server.url, token)

/** Every item of a paged list, walking `X-Next-Cursor` with pages of `limit`. */
const walk = async (path: string, field: string, limit = 5): Promise<Array<any>> => {
  const items: Array<any> = []
  let cursor: string | null = null
  for (let pages = 0; pages < 50; pages++) {
    const sep = path.includes("?") ? "&" : "?"
    const reply: Reply = await as().get(`${path}${sep}limit=${limit}${cursor === null ? "" : `&cursor=${cursor}`}`)
    expect(reply.status, `${path}: ${JSON.stringify(reply.body)}`).toBe(200)
    items.push(...reply.body[field])
    cursor = reply.headers.get("x-next-cursor")
    if (cursor === null) return items
  }
  throw new Error(`${path} did not end`)
}

const numbered = (prefix: string) => Array.from({ length: N }, (_, i) => `${prefix}${i + 1}`)
const byName = (names: ReadonlyArray<string>) => [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("lena")
  expect((await as().post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as().post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("lists of more than ten items", () => {
  it("CI runs newest first by number, ?limit=1 is the newest; a CI log's pieces in order", async () => {
    const workflow = [
      "on: manual",
      "jobs:",
      "  count:",
      "    steps:",
      // Well past ten log pieces: the runner stores what a step printed every 50 ms.
      `      - run: for i in $(seq 1 ${N + 3}); do echo "line-$i"; sleep 0.07; done`
    ].join("\n")
    const c = buildCommit({ branch: "ci", files: { ".oak/workflows/count.yml": workflow, "README.md": "runs\n" } })
    expect((await as().post("/acme/app/push", pushBody({ branch: "ci", commits: [c] }))).body.success).toBe(true)
    const ids: Array<number> = []
    for (let i = 0; i < N; i++) {
      const started = await as().post("/acme/app/ci/runs", { workflow: "count", branch: "ci" })
      expect(started.status, JSON.stringify(started.body)).toBe(201)
      ids.push(started.body.run_ids[0])
    }
    const listed = await as().get("/acme/app/ci/runs")
    expect(listed.body.map((r: any) => r.id)).toEqual([...ids].sort((a, b) => b - a))
    expect((await as().get("/acme/app/ci/runs?limit=1")).body.map((r: any) => r.id)).toEqual([Math.max(...ids)])

    const last = Math.max(...ids)
    const run = await waitFor(`run ${last}`, async () => {
      const reply = await as().get(`/acme/app/ci/runs/${last}`)
      return reply.body.status === "completed" ? reply.body : undefined
    }, 120_000)
    const logs: string = run.jobs[0].steps[0].logs
    const lines = logs.split("\n").filter((line) => line.startsWith("line-"))
    expect(lines).toEqual(Array.from({ length: N + 3 }, (_, i) => `line-${i + 1}`))
  }, 180_000)

  it("repositories by name, and newest created first", async () => {
    const names = numbered("r")
    for (const name of names) expect((await as().post("/repos", { name, organization_slug: "acme" })).status).toBe(201)
    const created = (await walk("/repos?sort=created", "repos")).map((r) => r.name).filter((n: string) => n !== "app")
    expect(created).toEqual([...names].reverse())
    const named = (await walk("/repos?sort=name", "repos")).map((r) => r.name).filter((n: string) => n !== "app")
    expect(named).toEqual(byName(names))
  }, 120_000)

  it("branches: main first, then the most recently updated", async () => {
    const names = numbered("topic-")
    for (const name of names) expect((await as().post("/acme/app/branches", { name })).status).toBe(201)
    const listed = (await walk("/acme/app/branches", "branches")).map((b) => b.name).filter((n: string) => names.includes(n))
    expect(listed).toEqual([...names].reverse())
  }, 120_000)

  it("organizations, members and groups by name; service accounts by name and their keys oldest first", async () => {
    const orgs = numbered("org-")
    for (const slug of orgs) expect((await as().post("/orgs", { slug, name: slug })).status).toBe(201)
    expect((await walk("/orgs", "organizations")).map((o) => o.slug).filter((s: string) => orgs.includes(s))).toEqual(byName(orgs))

    const users = numbered("user")
    for (const user of users) {
      await server.createUser(user)
      expect((await as().post("/orgs/acme/members", { username: user })).status).toBe(201)
    }
    expect((await walk("/orgs/acme/members", "members")).map((m) => m.username)).toEqual(byName([...users, "lena"]))

    const groups = numbered("team-")
    for (const slug of groups) expect((await as().post("/orgs/acme/groups", { slug })).status).toBe(201)
    expect((await walk("/orgs/acme/groups", "groups")).map((g) => g.slug)).toEqual(byName(groups))

    const accounts = numbered("bot-")
    for (const name of accounts) expect((await as().post("/orgs/acme/service-accounts", { name })).status).toBe(201)
    expect((await walk("/orgs/acme/service-accounts", "service_accounts")).map((a) => a.name)).toEqual(byName(accounts))

    const keys: Array<string> = []
    for (const name of numbered("key-")) {
      const key = await as().post("/orgs/acme/service-accounts/bot-1/keys", { name, scopes: "read" })
      expect(key.status, JSON.stringify(key.body)).toBe(201)
      keys.push(key.body.key_id)
    }
    expect((await walk("/orgs/acme/service-accounts/bot-1/keys", "keys")).map((k) => k.key_id)).toEqual(keys)
  }, 300_000)

  it("personal keys oldest first; the audit log newest first by number", async () => {
    const names = numbered("laptop-")
    for (const name of names) expect((await as().post("/api-keys", { name })).status).toBe(201)
    const listed = (await walk("/api-keys", "api_keys")).map((k) => k.name).filter((n: string) => names.includes(n))
    expect(listed).toEqual(names)

    const entries = await walk("/orgs/acme/audit", "entries", 7)
    expect(entries.length).toBeGreaterThan(N)
    const ids = entries.map((e) => Number(e.id))
    expect(ids).toEqual([...ids].sort((a, b) => b - a))
  }, 120_000)
})
