/**
 * Idempotency keys are bound to the caller, the method, the path and the
 * body: the same key with another request answers 409 idempotency_key_reused.
 * Operations are readable only by the caller that started them, unknown ones
 * answer 404, and a write accepted (202) before the embedded server was killed
 * is, after a restart, either applied or settled as failed, never pending.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let alice: string
let bob: string

beforeAll(async () => {
  server = await startServer()
  alice = await server.createUser("alice")
  bob = await server.createUser("bob")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("idempotency keys", () => {
  it("replay the same request and refuse another request under the same key", async () => {
    const a = api(server.url, alice)
    const key = { "idempotency-key": "create-1" }
    const first = await a.post("/repos", { name: "first" }, key)
    expect(first.status).toBe(201)
    expect((await a.post("/repos", { name: "first" }, key)).body).toEqual(first.body)

    const other = await a.post("/repos", { name: "second" }, key)
    expect(other.status).toBe(409)
    expect(other.body.code).toBe("idempotency_key_reused")
    expect(isErrorBody(other.body)).toBe(true)
    expect((await a.get("/alice/second")).status).toBe(404)

    // Another caller's key of the same text is theirs alone.
    const bobs = await api(server.url, bob).post("/repos", { name: "first" }, key)
    expect(bobs.status).toBe(201)
    expect(bobs.body.full_name).toBe("bob/first")
  })

  it("bind the key to the method and path: a DELETE's key cannot create", async () => {
    const a = api(server.url, alice)
    expect((await a.post("/repos", { name: "doomed" })).status).toBe(201)
    const key = { "idempotency-key": "delete-then-create" }
    expect((await a.delete("/alice/doomed", key)).status).toBe(204)
    const create = await a.post("/repos", { name: "doomed" }, key)
    expect(create.status).toBe(409)
    expect(create.body.code).toBe("idempotency_key_reused")
    expect((await a.get("/alice/doomed")).status).toBe(404)
  })

  it("bind the key to the body: the same PATCH with another body is another request", async () => {
    const a = api(server.url, alice)
    expect((await a.post("/repos", { name: "vis" })).status).toBe(201)
    const key = { "idempotency-key": "vis-1" }
    const call = (isPublic: boolean) => a.raw("PATCH", "/alice/vis/visibility", { is_public: isPublic }, key)
    expect((await call(true)).status).toBe(200)
    expect((await call(true)).status).toBe(200)
    expect((await call(false)).body.code).toBe("idempotency_key_reused")
  })
})

describe("operations", () => {
  it("answer 404 for ids never issued", async () => {
    const a = api(server.url, alice)
    expect((await a.get(`/operations/${randomUUID()}`)).status).toBe(404)
    expect((await a.get("/operations/idem:anything")).status).toBe(404)
  })
})

describe("a write accepted before the embedded server is killed", () => {
  it("is applied or settled as failed after a restart, never pending", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-crash-"))
    try {
      // Every write answers 202 at once, so many are still queued in the in-process bus when the server dies.
      let node = await startServer({ dataDir, env: { GROVE_COMMAND_TIMEOUT_MS: "1" } })
      const token = await node.createUser("carol")
      // Branches of one repository: one partition, handled one at a time, so a queue builds up behind it.
      expect([201, 202]).toContain((await api(node.url, token).post("/repos", { name: "crash" })).status)
      while ((await api(node.url, token).get("/carol/crash")).status !== 200) await new Promise((r) => setTimeout(r, 20))
      const names = Array.from({ length: 300 }, (_, i) => `crash-${i}`)
      const key = (i: number) => ({ "idempotency-key": `crash-key-${i}` })
      // Killed while most requests are still under way: the answers that came back are the accepted writes.
      const answered: Array<{ readonly i: number; readonly status: number; readonly body: any }> = []
      const died = new Promise((resolve) => node.process.once("exit", resolve))
      const inFlight = names.map((name, i) =>
        api(node.url, token).post("/carol/crash/branches", { name }, key(i)).then(
          (reply) => {
            answered.push({ i, status: reply.status, body: reply.body })
            if (answered.length === 40) node.process.kill("SIGKILL")
          },
          () => undefined
        )
      )
      await Promise.all(inFlight)
      await died
      const pending = answered.filter((reply) => reply.status === 202)
      expect(answered.every((reply) => reply.status === 201 || reply.status === 202)).toBe(true)

      node = await startServer({ dataDir })
      try {
        const a = api(node.url, token)
        let applied = 0
        let failed = 0
        // Every write answered 202 before the kill is done now: applied, or settled as failed.
        for (const reply of pending) {
          const operation = await a.get(`/operations/${reply.body.operation_id}`)
          expect(operation.status).toBe(200)
          expect(operation.body.status).toBe("done")
          const exists = (await a.get(`/carol/crash/branches/${names[reply.i]}`)).status === 200
          if (operation.body.http_status === 201) {
            applied++
            expect(exists).toBe(true)
          } else {
            failed++
            expect(operation.body.http_status).toBe(503)
            expect(operation.body.response.code).toBe("write_failed")
            expect(exists).toBe(false)
          }
        }
        // Every request, answered or not, retried with its key: its first outcome, never pending.
        let settledUnanswered = 0
        for (let i = 0; i < names.length; i++) {
          const again = await a.post("/carol/crash/branches", { name: names[i] }, key(i))
          const exists = (await a.get(`/carol/crash/branches/${names[i]}`)).status === 200
          expect([201, 503]).toContain(again.status)
          expect(exists).toBe(again.status === 201)
          if (again.status === 503) settledUnanswered++
        }
        console.log(
          `kill -9 after ${answered.length} of 300 answers (${pending.length} were 202): ${applied} applied, ${failed} settled as failed after the restart; ` +
            `${settledUnanswered} unanswered ones were in flight and settled as failed`
        )
      } finally {
        await node.stop()
      }
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }, 240_000)
})
