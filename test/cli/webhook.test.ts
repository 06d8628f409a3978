/**
 * `grove webhook` end to end with the real binary: add (the secret from stdin), list, a delivery
 * seen in `deliveries`, `redeliver`, `remove`, and the server's refusals as exit codes (an address
 * not allowed: exit 1; a bad --events: exit 2).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { waitFor } from "../support/waitFor.ts"
import { opensslHmac, type Receiver, startReceiver } from "../support/WebhookReceiver.ts"
import { at, grove, type GroveOptions, json, ok, removeTempDirs, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let receiver: Receiver
let hana: GroveOptions

beforeAll(async () => {
  receiver = await startReceiver()
  // The receiver on 127.0.0.1 is reached the operator's way (README: receivers on an internal network).
  server = await startServer({ dataDir: tempDir("data"), args: ["--webhook-allow", "127.0.0.1/32"] })
  hana = userOf(server, "hana", await server.createUser("hana"))
}, 300_000)

afterAll(async () => {
  await server?.stop()
  await receiver?.close()
  removeTempDirs()
})

describe("grove webhook", () => {
  it("add, list, deliveries, redeliver, remove", async () => {
    const work = tempDir("work")
    await ok(["init", "--name", "hooked"], at(hana, work))
    fs.writeFileSync(path.join(work, "README.md"), "one\n")
    await ok(["push"], at(hana, work))
    const url = `http://127.0.0.1:${receiver.port}/cli`
    const added = json(await ok(["webhook", "add", url, "--events", "push", "--secret-stdin", "--json"], { ...at(hana, work), input: "cli-secret\n" }))
    expect(added).toMatchObject({ url, events: ["push"], has_secret: true })
    expect((await ok(["webhook", "list"], at(hana, work))).stdout).toContain(added.id)

    fs.writeFileSync(path.join(work, "README.md"), "two\n")
    await ok(["push"], at(hana, work))
    await waitFor("the push delivery", async () => (receiver.received.length > 0 ? true : undefined))
    const request = receiver.received[0]!
    expect(request.headers["x-service-signature-256"]).toBe(opensslHmac("cli-secret", request.raw))
    const log = await waitFor("the delivery log", async () => {
      const list = json(await ok(["webhook", "deliveries", added.id, "--json"], at(hana, work))).deliveries
      return list[0]?.status === "succeeded" ? list : undefined
    })
    expect(log[0]).toMatchObject({ id: request.headers["x-service-delivery-id"], event: "push", status_code: 204 })
    const again = json(await ok(["webhook", "redeliver", added.id, log[0].id, "--json"], at(hana, work)))
    expect(again).toMatchObject({ redelivery_of: log[0].id })
    await waitFor("the redelivery", async () => (receiver.received.length > 1 ? true : undefined))

    const refused = await grove(["webhook", "add", "http://169.254.169.254/latest", "--json"], at(hana, work))
    expect(refused.code).toBe(1)
    expect(json(refused)).toMatchObject({ status: 400, code: "address_not_allowed" })
    expect((await grove(["webhook", "add", url, "--events", "deploy"], at(hana, work))).code).toBe(2)
    await ok(["webhook", "remove", added.id], at(hana, work))
    expect(json(await ok(["webhook", "list", "--json"], at(hana, work)))).toEqual({ webhooks: [] })
  }, 120_000)
})
