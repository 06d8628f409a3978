/**
 * Correctness under concurrency, embedded mode: many clients push branches, sync, merge and revert on
 * one repository at once; the invariants of test/support/Workload.ts must hold.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { checkInvariants, runWorkload } from "../support/Workload.ts"

let server: GroveServer
let token: string

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("stress")
  expect((await api(server.url, token).post("/repos", { name: "busy" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("concurrency (embedded)", () => {
  it("keeps main linear, every 200 merge on main once, every acknowledged push, no 500", async () => {
    const outcomes = await runWorkload({ urls: () => [server.url], token, owner: "stress", repo: "busy", clients: 8, rounds: 6 })
    const result = await checkInvariants(server.url, token, "stress", "busy", outcomes)
    expect(result.merges).toBeGreaterThan(8)
    const codes = outcomes.filter((o) => o.status === 409).map((o) => `${o.op}:${o.body.code}`)
    console.log(`stress embedded: ${outcomes.length} requests, ${result.merges} merges, main length ${result.mainLength}, 409s: ${JSON.stringify(codes)}`)
  }, 300_000)
})
