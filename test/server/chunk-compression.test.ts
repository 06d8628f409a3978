/**
 * zstd on the chunk routes, with raw HTTP requests against the real server:
 * the capability is advertised; `chunks/batch` takes compressed frames and
 * stores the plain bytes (verified by their hash); `chunks/fetch` answers raw
 * frames to a client that does not ask (the Oak client), and compressible
 * chunks compressed (incompressible ones raw) to one that asks for `zstd_v1`.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import * as ChunkCompression from "@grove/core/objects/ChunkCompression"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { zstdCompressSync, zstdDecompressSync } from "node:zlib"
import { batchBody, buildCommit, decodeBatch, noise, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let token: string

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("zed")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd])
const text = Buffer.from("export const answer = compute(42) // the same line, many times\n".repeat(400))
const random = noise(30_000, 7)
/** Raw bytes that start with the zstd magic but are no zstd frame: a receiver must fall back to raw. */
const lookalike = Buffer.concat([ZSTD_MAGIC, noise(5_000, 9)])

const post = (path: string, body: Uint8Array | string, contentType: string) =>
  fetch(`${server.url}/api/zed/${path}`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": contentType }, body: body as NonNullable<RequestInit["body"]> })

const fetchFrames = async (hashes: ReadonlyArray<string>, extra: Record<string, unknown> = {}) => {
  const response = await post("squash/chunks/fetch", JSON.stringify({ hashes, ...extra }), "application/json")
  const frames = response.status === 200 ? await decodeBatch(new Uint8Array(await response.arrayBuffer())) : []
  return { status: response.status, header: response.headers.get(ChunkCompression.RESPONSE_HEADER), frames, response }
}

describe("chunk compression", () => {
  it("is advertised, taken on upload and given on download only when asked", async () => {
    const caps = await api(server.url).get("/capabilities")
    expect(caps.body).toMatchObject({ [ChunkCompression.CAPABILITY]: ChunkCompression.ZSTD_V1 })

    expect((await api(server.url, token).post("/repos", { name: "squash" })).status).toBe(201)
    const files = { "a.ts": text, "b.bin": random, "c.dat": lookalike }
    const hashes = Object.values(files).map((bytes) => Blake3.hash(bytes))
    const compressed = zstdCompressSync(text)
    expect(compressed.length).toBeLessThan(text.length / 4)
    // A compressed frame whose plain bytes do not hash to its name is refused.
    const wrong = await post("squash/chunks/batch", batchBody([{ hash: Blake3.hash(random), data: compressed }]), "application/octet-stream")
    expect(wrong.status).toBe(400)
    expect(await wrong.json()).toMatchObject({ error: expect.stringMatching(/do not hash/) })
    const batch = await post(
      "squash/chunks/batch",
      batchBody([{ hash: hashes[0]!, data: compressed }, { hash: hashes[1]!, data: random }, { hash: hashes[2]!, data: lookalike }]),
      "application/octet-stream"
    )
    expect(batch.status).toBe(200)
    const c = buildCommit({ branch: "z", files })
    const pushed = await api(server.url, token).post("/zed/squash/push", pushBody({ branch: "z", commits: [c], blobs: [] }))
    expect(pushed.body).toEqual({ success: true, new_head: c.commit.hash, message: "ok" })

    // Not asked (the Oak client, any older client): every frame raw, no header. Stored plain, so the text is its own bytes.
    const plain = await fetchFrames(hashes)
    expect(plain.status).toBe(200)
    expect(plain.header).toBeNull()
    expect(plain.frames.map((f) => f.hash)).toEqual(hashes)
    plain.frames.forEach((f, i) => expect(Buffer.from(f.data).equals(Object.values(files)[i]!)).toBe(true))

    // Asked: the text comes compressed, the incompressible chunks raw; each reads back by the protocol's rule.
    const asked = await fetchFrames(hashes, { compression: "zstd_v1" })
    expect(asked.header).toBe(ChunkCompression.ZSTD_V1)
    expect(asked.frames.map((f) => f.hash)).toEqual(hashes)
    const [a, b, cc] = asked.frames.map((f) => Buffer.from(f.data))
    expect(a!.subarray(0, 4).equals(ZSTD_MAGIC) && a!.length < text.length / 4).toBe(true)
    expect(zstdDecompressSync(a!).equals(text)).toBe(true)
    expect(b!.equals(random)).toBe(true)
    expect(cc!.equals(lookalike)).toBe(true)
    asked.frames.forEach((f, i) => {
      const bytes = ChunkCompression.plainChunkBytes(f.hash, f.data, Object.values(files)[i]!.length)
      expect(bytes !== undefined && Buffer.from(bytes).equals(Object.values(files)[i]!)).toBe(true)
    })

    // An encoding the server does not know is a clear 400, not raw bytes the client would misread.
    const unknown = await fetchFrames(hashes, { compression: "brotli" })
    expect(unknown.status).toBe(400)
    expect(await unknown.response.json()).toMatchObject({ code: "invalid_request" })
  }, 120_000)
})
