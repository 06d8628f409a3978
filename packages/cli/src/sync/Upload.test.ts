import { ApiSync } from "@grove/api"
import { FastCdc, Objects } from "@grove/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { envLayer, tempDir } from "../../test/support.ts"
import type { OutgoingBlob } from "./Outgoing.ts"
import { connectRepo } from "./RemoteRepo.ts"
import { readRange, uploadBlobs } from "./Upload.ts"

describe("Upload.readRange", () => {
  // Small ranges are read synchronously, large ones through fs.promises: both give the exact bytes or fail.
  it.effect("reads a range byte-exactly at any offset, small (sync) and large, and fails on a file shorter than expected", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-upload-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const file = path.join(dir, "data")
      const bytes = new Uint8Array(1024 * 1024 + 333).map((_, i) => (i * 131 + (i >> 9)) % 256)
      fs.writeFileSync(file, bytes)
      for (const [offset, size] of [[0, 0], [0, 1], [7, 4096], [1000, 256 * 1024 - 1], [5, 256 * 1024], [333, 1024 * 1024]]) {
        const got = yield* Effect.promise(() => readRange({ hash: "", file, offset: offset!, size: size! }))
        expect(Buffer.from(got).equals(Buffer.from(bytes.subarray(offset!, offset! + size!))), `${offset}+${size}`).toBe(true)
      }
      for (const size of [100, 512 * 1024]) {
        const error = yield* Effect.flip(Effect.tryPromise(() => readRange({ hash: "", file, offset: bytes.length - 10, size })))
        expect(String(error.cause)).toContain("is shorter than expected")
      }
    }).pipe(Effect.scoped))
})

/**
 * A stand-in server for uploads, taking nothing compressed (hashed frames, plain bodies): every blob and chunk is
 * missing. It records each chunks/check (the hashes it names) and each chunks/batch (the hashes of its frames) in the
 * order they arrive, and holds its answer to blobs/check until a first batch has arrived (10 s at most).
 */
const uploadServer = () =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{
        url: string
        events: Array<{ kind: "check" | "batch"; hashes: Array<string>; body: string; type: string | undefined }>
        batchBeforeBlobsAnswered: () => boolean
        server: http.Server
      }>((resolve) => {
        const events: Array<{ kind: "check" | "batch"; hashes: Array<string>; body: string; type: string | undefined }> = []
        let batchArrived = () => {}
        let batchSeen = false
        let blobsAnswered = false
        let batchBeforeBlobsAnswered = false
        const json = (response: http.ServerResponse, body: unknown) => {
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify(body))
        }
        const server = http.createServer((request, response) => {
          const parts: Array<Buffer> = []
          const url = request.url ?? ""
          const event = { kind: url.endsWith("/chunks/check") ? "check" as const : "batch" as const, hashes: [] as Array<string>, body: "", type: request.headers["content-type"] }
          if (/\/chunks\/(check|batch)$/.test(url)) events.push(event)
          if (url.endsWith("/chunks/batch") && !batchSeen) {
            batchSeen = true
            batchBeforeBlobsAnswered = !blobsAnswered
            batchArrived()
          }
          request.on("data", (part: Buffer) => parts.push(part))
          request.on("end", () => {
            const body = Buffer.concat(parts)
            if (url === "/api/capabilities") return json(response, {})
            if (url.endsWith("/blobs/check")) {
              const answer = () => {
                clearTimeout(timer)
                blobsAnswered = true
                json(response, { missing: (JSON.parse(body.toString()) as { hashes: Array<string> }).hashes })
              }
              const timer = setTimeout(answer, 10_000)
              if (batchSeen) answer()
              else batchArrived = answer
              return
            }
            if (url.endsWith("/chunks/check")) {
              const hashes = (JSON.parse(body.toString()) as { hashes: Array<string> }).hashes
              event.hashes.push(...hashes)
              event.body = body.toString()
              return json(response, { missing: hashes.map((hash) => ({ hash, upload_url: null })) })
            }
            if (url.endsWith("/chunks/batch")) {
              // Hashed frames: u32 hash length, the hash, u32 data length, the data.
              for (let at = 0; at < body.length;) {
                const hashLength = body.readUInt32BE(at)
                event.hashes.push(body.toString("latin1", at + 4, at + 4 + hashLength))
                at += 4 + hashLength
                at += 4 + body.readUInt32BE(at)
              }
              return json(response, {})
            }
            response.writeHead(404).end()
          })
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({
            url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
            events,
            batchBeforeBlobsAnswered: () => batchBeforeBlobsAnswered,
            server
          }))
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  )

describe("Upload.uploadBlobs", () => {
  it.effect("sends the small files' first batch while the large file is still asked about, in the batches one plan makes", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("upload-order")
      // 400 small files of 1 KiB (two batches: 256, then 144) and one 11 MiB file (cut into chunks).
      const blobs: Array<OutgoingBlob> = []
      for (let i = 0; i < 400; i++) {
        const bytes = randomBytes(1024)
        const file = path.join(dir, `s${i}`)
        fs.writeFileSync(file, bytes)
        blobs.push({ hash: Objects.Blake3.hash(bytes), size: bytes.length, file })
      }
      const big = randomBytes(11 * 1024 * 1024)
      const bigFile = path.join(dir, "big")
      fs.writeFileSync(bigFile, big)
      blobs.push({ hash: Objects.Blake3.hash(big), size: big.length, file: bigFile })
      const bigChunks = FastCdc.boundaries(big).map((b) => Objects.Blake3.hash(big.subarray(b.offset, b.offset + b.length)))
      const bigSizes = FastCdc.boundaries(big).map((b) => b.length)
      const server = yield* uploadServer()
      let handedOver: ReadonlyArray<ApiSync.BlobData> | undefined
      const remote = yield* connectRepo(server.url, "alice", "demo").pipe(
        Effect.provide(envLayer({ home: dir, cwd: dir, env: { SERVICE_API_KEY: "grove_test" } }))
      )
      const result = yield* uploadBlobs(remote, blobs, (list) => (handedOver = list))
      const small = blobs.slice(0, 400).map((b) => b.hash)
      // The first batch went while blobs/check was still unanswered (the server held that answer until it came).
      expect(server.batchBeforeBlobsAnswered()).toBe(true)
      // The same batches as one plan of the small files' chunks and then the large file's: 256, then 144 + its chunks.
      expect(server.events.filter((e) => e.kind === "batch").map((e) => e.hashes)).toEqual([small.slice(0, 256), [...small.slice(256), ...bigChunks]])
      expect(server.events.filter((e) => e.kind === "check").flatMap((e) => e.hashes).sort()).toEqual([...small, ...bigChunks].sort())
      // Each chunks/check body is what the typed client's encode makes of it (the client sends it by hand).
      const sizeOf = new Map([...small.map((h) => [h, 1024] as const), ...bigChunks.map((h, i) => [h, bigSizes[i]!] as const)])
      for (const check of server.events.filter((e) => e.kind === "check")) {
        expect(check.type).toBe("application/json")
        const typed = Schema.encodeSync(ApiSync.ChunkCheckRequest)({
          hashes: check.hashes,
          sizes: check.hashes.map((h) => sizeOf.get(h)!),
          chunk_batch_protocol: "bounded_v1"
        })
        expect(check.body).toBe(JSON.stringify(typed))
      }
      expect(result).toMatchObject({ uploadedChunks: 400 + bigChunks.length, uploadedBytes: 400 * 1024 + big.length })
      expect(handedOver?.map((b) => [b.hash, (b.chunks ?? []).map((c) => c.hash)])).toEqual([[blobs[400]!.hash, bigChunks]])
    }).pipe(Effect.scoped), 60_000)
})
