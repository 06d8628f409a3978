/**
 * Writes that outlive their deadline: with a 1 ms command timeout every write
 * answers 202 with an operation id, and the operation later shows the answer
 * the write would have given (201, or the 409 of a taken name), to its caller only.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let owner: string
let other: string

beforeAll(async () => {
  server = await startServer({ env: { GROVE_COMMAND_TIMEOUT_MS: "1" } })
  owner = await server.createUser("olga")
  other = await server.createUser("oscar")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const settle = async (token: string, id: string) => {
  for (let i = 0; i < 100; i++) {
    const op = await api(server.url, token).get(`/operations/${encodeURIComponent(id)}`)
    expect(op.status).toBe(200)
    if (op.body.status === "done") return op.body
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error("operation never finished")
}

describe("operations", () => {
  it("answers 202 with an operation id, whose outcome is the write's answer", async () => {
    const a = api(server.url, owner)
    const pending = await a.post("/repos", { name: "slow" })
    expect(pending.status).toBe(202)
    expect(pending.body.code).toBe("pending")
    const done = await settle(owner, pending.body.operation_id)
    expect(done.http_status).toBe(201)
    expect(done.response).toMatchObject({ full_name: "olga/slow", visibility: "private" })

    const dup = await a.post("/repos", { name: "slow" })
    expect(dup.status).toBe(202)
    const failed = await settle(owner, dup.body.operation_id)
    expect(failed.http_status).toBe(409)
    expect(failed.response).toEqual({ error: "a repository named olga/slow already exists", code: "name_taken" })
  })

  it("shows an operation only to its caller", async () => {
    const pending = await api(server.url, owner).post("/repos", { name: "mine" }, { "idempotency-key": "op-key-1" })
    expect(pending.status).toBe(202)
    await settle(owner, pending.body.operation_id)
    expect((await api(server.url, other).get(`/operations/${encodeURIComponent(pending.body.operation_id)}`)).status).toBe(404)
    expect((await api(server.url).get(`/operations/${encodeURIComponent(pending.body.operation_id)}`)).status).toBe(401)
    expect((await api(server.url, owner).get("/operations/not-an-operation")).status).toBe(404)
  })
})
