/**
 * The API contract did not move with the code (issue 23): `/api/openapi.json` of the real server is
 * the document main served before the server's files moved into feature folders
 * (`openapi.fixture.json`, saved from main at 7155f93), up to the order of object keys.
 * A deliberate change to the API regenerates the fixture: start a server and save
 * `GET /api/openapi.json` over it, in the same commit as the change.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type GroveServer, startServer } from "../support/GroveServer.ts"

const FIXTURE = path.join(import.meta.dirname, "openapi.fixture.json")

/** The same JSON with every object's keys sorted: what is left to differ is content or array order. */
const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : value !== null && typeof value === "object"
    ? Object.fromEntries(Object.keys(value).sort().map((key) => [key, canonical((value as Record<string, unknown>)[key])]))
    : value

let server: GroveServer

beforeAll(async () => {
  server = await startServer()
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("openapi", () => {
  it("serves the document of before the move, differing at most in the order of keys", async () => {
    const response = await fetch(`${server.url}/api/openapi.json`)
    expect(response.status).toBe(200)
    const served = (await response.json()) as { paths: Record<string, unknown> }
    const before = JSON.parse(fs.readFileSync(FIXTURE, "utf8"))
    expect(Object.keys(served.paths).length).toBe(Object.keys(before.paths).length)
    expect(canonical(served)).toEqual(canonical(before))
  })
})
