/**
 * `POST .../chunks/batch` against the real server (sync/ChunkRoutes.ts): the body's frames are split as its parts
 * arrive, so the entry limit and a frame's header or data cut across parts must hold whatever the pieces: 256 chunks
 * are stored and a 257th answers 400 too_many (bare frames in one zstd body, grove's client's form; hashed frames
 * sent in small pieces, the Oak client's), hashed frames cut anywhere are stored as sent, and one whose bytes do not
 * hash to its name answers 400 invalid_chunk. (What a stored chunk reads back as: body-compression.test.)
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Frames from "@grove/core/objects/Frames"
import * as http from "node:http"
import { zstdCompressSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { batchBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let token: string

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("bea")
  expect((await api(server.url, token).post("/repos", { name: "b" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

/** A POST on a connection of its own, its body written in pieces of `piece` bytes (each its own socket write). */
const post = (path: string, body: Uint8Array, headers: Record<string, string>, piece = body.length) =>
  new Promise<{ status: number; json: any }>((resolve, reject) => {
    const url = new URL(`${server.url}/api/bea/b${path}`)
    const request = http.request({
      agent: false,
      host: url.hostname,
      port: url.port,
      method: "POST",
      path: url.pathname,
      headers: { authorization: `Bearer ${token}`, "content-length": String(body.length), connection: "close", ...headers }
    }, (response) => {
      const parts: Array<Buffer> = []
      response.on("data", (d: Buffer) => parts.push(d))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, json: JSON.parse(Buffer.concat(parts).toString()) }))
      response.on("error", reject)
    })
    // The server may answer (400) and close before it has read the whole body.
    request.on("error", reject)
    for (let i = 0; i < body.length; i += Math.max(1, piece)) request.write(body.subarray(i, i + piece))
    request.end()
  })

const HASHED = { "content-type": "application/octet-stream" }
const BARE_ZSTD = { "content-type": Frames.BARE_CONTENT_TYPE, "content-encoding": "zstd" }

const chunksOf = (count: number, tag: string) => Array.from({ length: count }, (_, i) => Buffer.from(`${tag} chunk ${i}\n`.repeat(1 + (i % 7))))

/** Which of `hashes` the caller still has to upload (chunks/check): none once a batch of them is stored. */
const missing = async (hashes: ReadonlyArray<string>) => {
  const answer = await api(server.url, token).post("/bea/b/chunks/check", { hashes })
  expect(answer.status).toBe(200)
  return (answer.body as { missing: ReadonlyArray<unknown> }).missing
}

describe("chunks/batch", () => {
  it("stores 256 chunks and answers 400 too_many to a 257th, bare frames in a zstd body or hashed frames in pieces", async () => {
    const bare = (chunks: ReadonlyArray<Buffer>) => zstdCompressSync(Buffer.concat(Frames.encodeBareFrames(chunks.map((data) => ({ data, zstd: false })))))
    const hashed = (chunks: ReadonlyArray<Buffer>) => batchBody(chunks.map((data) => ({ hash: Blake3.hash(data), data })))
    for (const [form, body, headers, piece] of [
      ["bare frames, zstd body", bare, BARE_ZSTD, Infinity],
      ["hashed frames in pieces", hashed, HASHED, 1000]
    ] as const) {
      const full = chunksOf(256, form)
      const stored = await post("/chunks/batch", body(full), headers, piece)
      expect({ form, ...stored }).toEqual({ form, status: 200, json: { ok: true, received: 256 } })
      expect(await missing(full.map((c) => Blake3.hash(c)))).toEqual([])
      const over = await post("/chunks/batch", body(chunksOf(257, `${form} over`)), headers, piece)
      expect({ form, status: over.status, code: over.json.code, error: over.json.error }).toEqual({
        form,
        status: 400,
        code: "too_many",
        error: "at most 256 chunks per batch"
      })
    }
  }, 120_000)

  it("stores hashed frames cut anywhere (headers and data across pieces) and refuses one whose bytes do not hash to its name", async () => {
    const chunks = [...chunksOf(20, "cut"), Buffer.alloc(0), Buffer.alloc(300_000, 7)]
    const body = batchBody(chunks.map((data) => ({ hash: Blake3.hash(data), data })))
    for (const piece of [1, 7, 73, 4096]) {
      const answer = await post("/chunks/batch", body, HASHED, piece)
      expect({ piece, ...answer }).toEqual({ piece, status: 200, json: { ok: true, received: chunks.length } })
    }
    expect(await missing(chunks.map((c) => Blake3.hash(c)))).toEqual([])
    const wrong = batchBody([{ hash: Blake3.hash(Buffer.from("something else")), data: Buffer.from("these bytes") }])
    const refused = await post("/chunks/batch", wrong, HASHED, 5)
    expect({ status: refused.status, code: refused.json.code }).toEqual({ status: 400, code: "invalid_chunk" })
  }, 120_000)
})
