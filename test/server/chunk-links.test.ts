/**
 * Binary chunk downloads as the Oak client follows them (`chunks/download` with
 * `chunk_batch_protocol: "bounded_v1"` answers links, not bytes), and sparse pulls (`pull?paths=`).
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, chunkRefs, decodeBatch, inlineBlobs, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let sam: string
let tina: string
const big = new Uint8Array(11 * 1024 * 1024).map((_, i) => (i * 2654435761) >>> 24)
const refs = chunkRefs(big)
const commit = buildCommit({ branch: "links", files: { "big.bin": big, "src/a.ts": "a\n", "src/lib/b.ts": "b\n", "docs/d.md": "d\n", "top.txt": "top\n" } })

beforeAll(async () => {
  server = await startServer()
  sam = await server.createUser("sam")
  tina = await server.createUser("tina")
  expect((await api(server.url, sam).post("/repos", { name: "links" })).status).toBe(201)
  expect((await api(server.url, tina).post("/repos", { name: "other" })).status).toBe(201)
  for (const r of refs) {
    const put = await fetch(`${server.url}/api/sam/links/chunks/${r.hash}`, { method: "PUT", headers: { authorization: `Bearer ${sam}` }, body: r.data.slice() })
    expect(put.status).toBe(200)
  }
  const bigHash = Blake3.hash(big)
  const blobs = [
    { hash: bigHash, content: [], size: big.length, chunks: refs.map((r) => ({ hash: r.hash, offset: r.offset, size: r.size })) },
    ...inlineBlobs(commit).filter((b) => b.hash !== bigHash)
  ]
  const pushed = await api(server.url, sam).post("/sam/links/push", pushBody({ branch: "links", commits: [commit], blobs }))
  expect(pushed.body.success).toBe(true)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const download = (hashes: ReadonlyArray<string>, bounded = true) =>
  api(server.url, sam).post("/sam/links/chunks/download", { hashes, ...(bounded ? { chunk_batch_protocol: "bounded_v1" } : {}) })

describe("chunk links", () => {
  it("answers absolute per-chunk links and a batch URL instead of inline bytes; each link serves its chunk without a key", async () => {
    const reply = await download(refs.map((r) => r.hash))
    expect(reply.status).toBe(200)
    const origin = new URL(server.url)
    expect(reply.body.batch_url).toBe(`http://${origin.host}/api/sam/links/chunks/fetch`)
    expect(reply.body.chunks).toHaveLength(refs.length)
    for (const [i, chunk] of reply.body.chunks.entries()) {
      expect(chunk.content).toBeUndefined()
      expect(chunk.download_url).toMatch(new RegExp(`^http://${origin.host}/api/sam/links/chunks/fetch/${refs[i]!.hash}\\?t=[0-9]+\\.[0-9a-f]{64}$`))
    }
    const first = await fetch(reply.body.chunks[0].download_url)
    expect(first.status).toBe(200)
    expect(first.headers.get("content-type")).toBe("application/octet-stream")
    expect(Buffer.from(await first.arrayBuffer()).equals(Buffer.from(refs[0]!.data))).toBe(true)
    // Clients without the bounded protocol still get inline bytes.
    const inline = await download([refs[1]!.hash], false)
    expect(inline.body.chunks[0].download_url).toBeNull()
    expect(inline.body.chunks[0].content).toHaveLength(refs[1]!.size)
  })

  it("a link opens its own chunk only: another hash, another repository, a changed token answer 401", async () => {
    const reply = await download([refs[0]!.hash])
    const url = new URL(reply.body.chunks[0].download_url as string)
    const token = url.searchParams.get("t")!
    const denied = async (u: string) => {
      const r = await fetch(u)
      expect(r.status).toBe(401)
      expect(((await r.json()) as { code: string }).code).toBe("invalid_link")
    }
    await denied(`${server.url}/api/sam/links/chunks/fetch/${refs[1]!.hash}?t=${token}`)
    await denied(`${server.url}/api/tina/other/chunks/fetch/${refs[0]!.hash}?t=${token}`)
    await denied(`${server.url}/api/sam/links/chunks/fetch/${refs[0]!.hash}?t=${token.slice(0, -1)}${token.endsWith("0") ? "1" : "0"}`)
    await denied(`${server.url}/api/sam/links/chunks/fetch/${refs[0]!.hash}`)
    await denied(`${server.url}/api/sam/nope/chunks/fetch/${refs[0]!.hash}?t=${token}`)
    const malformed = await fetch(`${server.url}/api/sam/links/chunks/fetch/NOTAHASH?t=${token}`)
    expect(malformed.status).toBe(400)
  })

  it("the batch URL takes {hashes, tokens} without a key and answers frames in request order", async () => {
    const hashes = refs.slice(0, 3).map((r) => r.hash).reverse()
    const reply = await download(hashes)
    const tokens = reply.body.chunks.map((c: { download_url: string }) => new URL(c.download_url).searchParams.get("t"))
    const batch = await fetch(reply.body.batch_url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ hashes, tokens }) })
    expect(batch.status).toBe(200)
    const frames = await decodeBatch(new Uint8Array(await batch.arrayBuffer()))
    expect(frames.map((f) => f.hash)).toEqual(hashes)
    for (const f of frames) expect(Blake3.hash(f.data)).toBe(f.hash)
    const swapped = await fetch(reply.body.batch_url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ hashes, tokens: [...tokens].reverse() }) })
    expect(swapped.status).toBe(401)
    const short = await fetch(reply.body.batch_url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ hashes, tokens: tokens.slice(1) }) })
    expect(short.status).toBe(400)
    // Without tokens it is Grove's own keyed download, as before: anonymous callers do not see a private repository.
    expect((await fetch(reply.body.batch_url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ hashes }) })).status).toBe(404)
  })

  it("someone who cannot read the repository gets no links", async () => {
    const reply = await api(server.url, tina).post("/sam/links/chunks/download", { hashes: [refs[0]!.hash], chunk_batch_protocol: "bounded_v1" })
    expect(reply.status).toBe(404)
  })
})

describe("sparse pulls", () => {
  const blobAt = (path: string) => commit.snapshot.get(path)!.hash
  it("send every tree but only the blobs inside the cone", async () => {
    const full = await api(server.url, sam).get("/sam/links/pull?branch_name=links")
    const sparse = await api(server.url, sam).get(`/sam/links/pull?branch_name=links&paths=${encodeURIComponent("src/lib, docs/")}`)
    expect(sparse.status).toBe(200)
    expect(sparse.body.trees.map((t: { hash: string }) => t.hash).sort()).toEqual(full.body.trees.map((t: { hash: string }) => t.hash).sort())
    expect(sparse.body.blobs.map((b: { hash: string }) => b.hash).sort()).toEqual([blobAt("src/lib/b.ts"), blobAt("docs/d.md")].sort())
    expect(full.body.blobs).toHaveLength(5)
    const bad = await api(server.url, sam).get(`/sam/links/pull?branch_name=links&paths=${encodeURIComponent("src/../etc")}`)
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_paths"])
  })
})
