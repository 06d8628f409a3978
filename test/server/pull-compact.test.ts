/**
 * Grove's compact pull answer (api's PullCompact, `pull_answer: compact_v1`) from the real server: asked by its
 * media type, it leaves out what grove's client rebuilds, and rebuilt it is the plain answer's exact text; every
 * other Accept (the Oak client's) gets the plain answer as before.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { ApiPullCompact, type ApiSync } from "@grove/api"
import type { TreeEntry } from "@grove/core/objects/Tree"
import * as http from "node:http"
import { zstdDecompressSync } from "node:zlib"
import { type Built, buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let token: string
const commits: Array<Built> = []

/** Many small files (past LEAVE_OUT_FROM; the answer past the size from which answers go zstd). */
const manyFiles = (tag: string, count: number, dir = "src") =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`${dir}/d${i % 9}/f${i}.ts`, `export const ${tag}${i} = ${i}\n`]))

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("puller")
  const a = api(server.url, token)
  expect((await a.post("/repos", { name: "app" })).status).toBe(201)
  const first = buildCommit({ branch: "work", files: { ...manyFiles("a", 300), "run.sh": { content: "#!/bin/sh\n", mode: "executable" } } })
  // Modified, renamed, deleted, a mode changed, added.
  const { "src/d1/f1.ts": moved, "src/d2/f2.ts": _gone, ...rest } = manyFiles("a", 300)
  const second = buildCommit({
    branch: "work",
    parent: first,
    files: { ...rest, ...manyFiles("b", 120, "more"), "src/d0/f0.ts": "changed\n", "lib/f1.ts": moved!, "run.sh": "#!/bin/sh\n", "new.md": "new\n" }
  })
  // A files list a push accepts but that is not the canonical one (the Oak client may leave the modes out).
  const third = buildCommit({ branch: "work", parent: second, files: { ...rest, ...manyFiles("c", 120, "more"), "lib/f1.ts": moved!, "new.md": "new\n" } })
  third.commit.files = third.commit.files.map((change) => {
    const { new_mode: _, old_mode: __, ...rest } = change
    return rest
  })
  commits.push(first, second, third)
  const pushed = await a.post("/puller/app/push", pushBody({ branch: "work", commits }))
  expect(pushed.body).toMatchObject({ success: true })
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly text: string
}

/** GET over node:http (fetch would decode a zstd answer out of sight). */
const get = (path: string, headers: Record<string, string>) =>
  new Promise<Answer>((resolve, reject) => {
    const url = new URL(`${server.url}/api${path}`)
    const request = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, agent: false, headers: { authorization: `Bearer ${token}`, ...headers } }, (response) => {
      const parts: Array<Buffer> = []
      response.on("data", (d: Buffer) => parts.push(d))
      response.on("end", () => {
        const body = Buffer.concat(parts)
        const text = (response.headers["content-encoding"] === "zstd" ? zstdDecompressSync(body) : body).toString()
        resolve({ status: response.statusCode ?? 0, headers: response.headers, text })
      })
      response.on("error", reject)
    })
    request.on("error", reject)
    request.end()
  })

const pull = (query: string, accept?: string) => get(`/puller/app/pull?branch_name=work${query}`, accept === undefined ? {} : { accept })

/** What grove's client makes of a compact answer: blobs at once, the commits' files from the (checked) trees. */
const rebuild = (compact: ApiPullCompact.CompactPullResponse): ApiSync.PullResponse => {
  const trees = new Map(compact.trees.map((t) => [t.hash, t.entries as ReadonlyArray<TreeEntry>]))
  const files = ApiPullCompact.rebuildFiles(compact.commits, (hash) => trees.get(hash))
  if (!files.ok) throw new Error(files.reason)
  return { ...compact, commits: files.commits, blobs: ApiPullCompact.expandBlobs(compact.blobs) }
}

describe("the compact pull answer", () => {
  it("is advertised in capabilities", async () => {
    const capabilities = await api(server.url).get("/capabilities")
    expect(capabilities.body).toMatchObject({ pull_answer: "compact_v1" })
  })

  it("leaves out canonical files, one-chunk lists and contents; rebuilt, it is the plain answer's text", async () => {
    for (const query of ["", `&since=${commits[0]!.commit.hash}`, "&depth=2"]) {
      const plain = await pull(query, "application/json")
      const compact = await pull(query, ApiPullCompact.ACCEPT)
      expect([plain.status, compact.status]).toEqual([200, 200])
      expect(plain.headers["content-type"]).toBe("application/json")
      expect(compact.headers["content-type"]).toBe(ApiPullCompact.CONTENT_TYPE)
      const answer = JSON.parse(compact.text) as ApiPullCompact.CompactPullResponse
      expect(JSON.stringify(rebuild(answer))).toBe(plain.text)
      expect(compact.text.length).toBeLessThan(plain.text.length * 0.8)
      expect(answer.blobs.every((b) => b.chunks === undefined && b.content === undefined)).toBe(true)
      // Left out: a long list of a commit with no parent or its parent in the answer, if canonical (not the third's).
      expect(answer.commits.map((c, i) => c.files?.length ?? JSON.parse(plain.text).commits[i].files.length)).toEqual(
        query === "" ? [301, 125, 122] : [125, 122]
      )
      const leftOut = answer.commits.map((c) => c.files === undefined)
      expect(leftOut).toEqual(query === "" ? [true, true, false] : [false, false])
    }
  })

  it("goes zstd to a caller that accepts it, as a JSON answer does", async () => {
    const compact = await get("/puller/app/pull?branch_name=work", { accept: ApiPullCompact.ACCEPT, "accept-encoding": "zstd" })
    expect([compact.headers["content-type"], compact.headers["content-encoding"]]).toEqual([ApiPullCompact.CONTENT_TYPE, "zstd"])
    expect(JSON.parse(compact.text).head).toBe(commits[2]!.commit.hash)
  })

  it("says it varies on Accept in both forms, plain and zstd'd, so a shared cache keeps them apart", async () => {
    const vary = (answer: Answer) => [answer.headers["content-type"], answer.headers["content-encoding"], answer.headers["vary"]]
    const path = "/puller/app/pull?branch_name=work"
    const compact = ApiPullCompact.CONTENT_TYPE
    expect(vary(await get(path, {}))).toEqual(["application/json", undefined, "accept"])
    expect(vary(await get(path, { accept: ApiPullCompact.ACCEPT }))).toEqual([compact, undefined, "accept"])
    expect(vary(await get(path, { "accept-encoding": "zstd" }))).toEqual(["application/json", "zstd", "accept, accept-encoding"])
    expect(vary(await get(path, { accept: ApiPullCompact.ACCEPT, "accept-encoding": "zstd" }))).toEqual([compact, "zstd", "accept, accept-encoding"])
    // A branch with no commits answers in the form asked for, and says so too.
    expect(vary(await get("/puller/app/pull?branch_name=none", {}))).toEqual(["application/json", undefined, "accept"])
    expect(vary(await get("/puller/app/pull?branch_name=none", { accept: ApiPullCompact.ACCEPT }))).toEqual([compact, undefined, "accept"])
  })

  it("every other Accept gets the plain answer, as the Oak client always did", async () => {
    const plain = await pull("", "application/json")
    for (const accept of [undefined, "*/*", "application/json", `${ApiPullCompact.CONTENT_TYPE};q=0, application/json`]) {
      const answer = await pull("", accept)
      expect([answer.status, answer.headers["content-type"]]).toEqual([200, "application/json"])
      expect(answer.text).toBe(plain.text)
    }
    const parsed = JSON.parse(plain.text) as ApiSync.PullResponse
    expect(parsed.commits.every((c) => Array.isArray(c.files) && c.files.length > 0)).toBe(true)
    expect(parsed.blobs.every((b) => b.chunks?.length === 1)).toBe(true)
  })
})
