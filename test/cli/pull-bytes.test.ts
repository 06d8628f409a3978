/**
 * A `grove pull` that rewrites thousands of small files writes every one of them byte for byte. The pull's chunk
 * answers are read off a plain socket into one reused buffer (sync/StreamSocket.ts), so a frame handed on as a view
 * of that buffer must not be written after the next read has refilled it: a pull of 3,000 rewritten files once left
 * ~300 of them with another file's bytes, verified before the overwrite, recorded as clean.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { noise } from "../support/content.ts"
import type { GroveServer } from "../support/GroveServer.ts"
import { at, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir } from "./harness.ts"

let server: GroveServer
let nia: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  nia = { home: tempDir("nia"), env: { SERVICE_API_KEY: await server.createUser("nia"), GROVE_REMOTE: server.url } }
}, 300_000)

afterAll(async () => {
  await stopSuiteServers()
})

const FILES = 3_000
const write = (root: string, round: number) => {
  for (let i = 0; i < FILES; i++) {
    const file = path.join(root, `d${i % 30}`, `f${i}.bin`)
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, noise(4_000 + (i % 13) * 500, round * 100_003 + i))
  }
}

describe("grove pull of many rewritten small files", () => {
  it("writes each file's own bytes, over the plain-socket chunk answers", async () => {
    const work = tempDir("pull-bytes-work")
    write(work, 1)
    await ok(["init", "--name", "many", "--json"], at(nia, work))
    const pushed = json(await ok(["push", "--json"], at(nia, work)))
    const copy = path.join(tempDir("pull-bytes-copy"), "many")
    await ok(["clone", "nia/many", copy, "--branch", pushed.branch, "--json"], nia)
    write(work, 2)
    await ok(["push", "--json"], at(nia, work))
    await ok(["pull", "--json"], at(nia, copy))
    const differing: Array<string> = []
    for (let i = 0; i < FILES; i++) {
      const name = path.join(`d${i % 30}`, `f${i}.bin`)
      if (!fs.readFileSync(path.join(copy, name)).equals(fs.readFileSync(path.join(work, name)))) differing.push(name)
    }
    expect(differing).toEqual([])
    expect(json(await ok(["status", "--json"], at(nia, copy))).changes).toEqual([])
  }, 240_000)
})
