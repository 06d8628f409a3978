/**
 * `grove clone` and `grove pull` take the compact pull answer (api's PullCompact) from a server that has it, and the
 * plain one from a server that does not (here: a proxy that drops the Accept header, which such a server ignores):
 * both checkouts end with the same objects, byte for byte, and the same files and log.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { ApiPullCompact } from "@grove/api"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { type Built, buildCommit, pushBody } from "../support/content.ts"
import type { GroveServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { at, grove, type GroveOptions, json, listing, ok, startSuiteServer, stopSuiteServers, tempDir } from "./harness.ts"

let server: GroveServer
let token: string
const proxies: Array<{ readonly server: http.Server; readonly agent: http.Agent }> = []

/** A proxy to the server that notes the content type of every pull answer; `plain` drops the request's Accept. */
const proxy = async (plain: boolean) => {
  const target = new URL(server.url)
  const agent = new http.Agent({ keepAlive: true })
  const pulls: Array<string> = []
  const proxied = http.createServer((req, res) => {
    const headers = { ...req.headers }
    if (plain) delete headers["accept"]
    const out = http.request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (answer) => {
      if ((req.url ?? "").split("?")[0]!.endsWith("/pull")) pulls.push(String(answer.headers["content-type"]))
      answer.on("error", () => res.destroy())
      res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
      answer.pipe(res)
    })
    out.on("error", () => res.destroy())
    req.pipe(out)
  })
  await new Promise<void>((resolve) => proxied.listen(0, "127.0.0.1", resolve))
  proxies.push({ server: proxied, agent })
  return { url: `http://127.0.0.1:${(proxied.address() as AddressInfo).port}`, pulls }
}

/** Every file under `.grove/objects`, by path, with its bytes. */
const objectsOf = (root: string): Record<string, string> => {
  const dir = path.join(root, ".grove/objects")
  const out: Record<string, string> = {}
  for (const file of fs.readdirSync(dir, { recursive: true, encoding: "utf8" }).sort()) {
    const full = path.join(dir, file)
    if (fs.statSync(full).isFile()) out[file] = fs.readFileSync(full, "latin1")
  }
  return out
}

const FILES = Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`src/m${i % 7}/f${i}.ts`, `export const f${i} = ${i}\n`]))
const commits: Array<Built> = []

beforeAll(async () => {
  server = await startSuiteServer()
  token = await server.createUser("ann")
  expect((await api(server.url, token).post("/repos", { name: "app" })).status).toBe(201)
  const first = buildCommit({ branch: "work", files: { ...FILES, "run.sh": { content: "#!/bin/sh\n", mode: "executable" } } })
  const { "src/m1/f1.ts": moved, ...rest } = FILES
  const second = buildCommit({ branch: "work", parent: first, files: { ...rest, "lib/f1.ts": moved!, "src/m0/f0.ts": "changed\n", "run.sh": "#!/bin/sh\n" } })
  commits.push(first, second)
  expect((await api(server.url, token).post("/ann/app/push", pushBody({ branch: "work", commits }))).body).toMatchObject({ success: true })
}, 300_000)

afterAll(async () => {
  for (const { server: proxied, agent } of proxies.splice(0)) {
    agent.destroy()
    proxied.closeAllConnections()
    await new Promise<void>((resolve) => proxied.close(() => resolve()))
  }
  await stopSuiteServers()
})

describe("grove and the compact pull answer", () => {
  it("a clone and a pull from a server with it and from one without it end with the same checkout", async () => {
    const compact = await proxy(false)
    const plain = await proxy(true)
    const parent = tempDir("compact-clones")
    const user = (url: string): GroveOptions => ({ home: tempDir("ann"), env: { SERVICE_API_KEY: token, GROVE_REMOTE: url } })
    const sides = [{ via: compact, user: user(compact.url) }, { via: plain, user: user(plain.url) }]
    const roots = sides.map((_, i) => path.join(parent, `app-${i}`))
    for (const [i, side] of sides.entries()) await ok(["clone", "ann/app", roots[i]!, "--branch", "work"], at(side.user, parent))
    expect(compact.pulls).toEqual([ApiPullCompact.CONTENT_TYPE])
    expect(plain.pulls).toEqual(["application/json"])
    expect(objectsOf(roots[0]!)).toEqual(objectsOf(roots[1]!))
    expect(listing(roots[0]!)).toEqual(listing(roots[1]!))
    const logs = async () => Promise.all(sides.map(async (side, i) => json(await ok(["log", "--json"], at(side.user, roots[i]!)))))
    const [logged, other] = await logs()
    expect(logged.commits.map((c: { files: number }) => c.files)).toEqual([3, 121])
    expect(other).toEqual(logged)

    // A third commit on the server: each checkout pulls what is new since its head.
    const { "src/m2/f2.ts": _gone, ...kept } = FILES
    const third = buildCommit({ branch: "work", parent: commits[1]!, files: { ...kept, "src/m1/f1.ts": "back\n", "new.md": "new\n" } })
    expect((await api(server.url, token).post("/ann/app/push", pushBody({ branch: "work", commits: [third], expectedHead: commits[1]!.commit.hash }))).body)
      .toMatchObject({ success: true })
    for (const [i, side] of sides.entries()) await ok(["pull"], at(side.user, roots[i]!))
    expect(compact.pulls.at(-1)).toBe(ApiPullCompact.CONTENT_TYPE)
    expect(plain.pulls.at(-1)).toBe("application/json")
    expect(objectsOf(roots[0]!)).toEqual(objectsOf(roots[1]!))
    expect(listing(roots[0]!)).toEqual(listing(roots[1]!))
    const [after, otherAfter] = await logs()
    expect(after.commits.map((c: { files: number }) => c.files)).toEqual([third.commit.files.length, 3, 121])
    expect(otherAfter).toEqual(after)
    expect(await grove(["status", "--json"], at(sides[0]!.user, roots[0]!))).toMatchObject({ code: 0 })
  })
})
