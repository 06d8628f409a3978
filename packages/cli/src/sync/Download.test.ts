import { describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { zstdDecompressSync } from "node:zlib"
import { tempDir } from "../../test/support.ts"
import { downloadBlobs, fetchRequest } from "./Download.ts"
import type { RemoteRepo, StreamedInit } from "./RemoteRepo.ts"

/** A server that takes zstd bodies (as grove's does), counting the capabilities requests it is asked. */
const capableServer = async () => {
  let asked = 0
  const server = http.createServer((request, response) => {
    if (request.url === "/api/capabilities") asked++
    response.setHeader("content-type", "application/json")
    response.end(JSON.stringify({ [BodyCompression.CAPABILITY]: BodyCompression.ZSTD_V1 }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    port: (server.address() as AddressInfo).port,
    asked: () => asked,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** A request body's bytes. */
const bytesOf = (body: string | Uint8Array | undefined) => Buffer.from(body ?? "")

/** fetchRequest reads only where the request goes (and with which token). */
const remoteAt = (site: string) => ({ site, token: undefined }) as unknown as RemoteRepo

const hashes = Array.from({ length: 600 }, (_, i) => i.toString(16).padStart(64, "0"))

describe("Download.fetchRequest", () => {
  it("sends a long hash list plain to a server on this machine (no capabilities asked), zstd when asked as from another machine", async () => {
    const server = await capableServer()
    const before = process.env["GROVE_CHUNK_COMPRESSION"]
    try {
      delete process.env["GROVE_CHUNK_COMPRESSION"]
      // Loopback: the bytes cost nothing there, zstd costs both sides CPU (a clone's four hash lists: ~20-30 ms).
      const near = await fetchRequest(remoteAt(`http://127.0.0.1:${server.port}`), hashes)
      expect(near.contentEncoding).toBeUndefined()
      expect(JSON.parse(bytesOf(near.body).toString()).hashes).toEqual(hashes)
      expect(server.asked()).toBe(0)
      // As from a remote server (GROVE_CHUNK_COMPRESSION=on): the list goes zstd once the server says it takes it.
      process.env["GROVE_CHUNK_COMPRESSION"] = "on"
      const far = await fetchRequest(remoteAt(`http://localhost:${server.port}`), hashes)
      expect(far.contentEncoding).toBe("zstd")
      expect(JSON.parse(zstdDecompressSync(bytesOf(far.body)).toString()).hashes).toEqual(hashes)
      expect(server.asked()).toBe(1)
    } finally {
      if (before === undefined) delete process.env["GROVE_CHUNK_COMPRESSION"]
      else process.env["GROVE_CHUNK_COMPRESSION"] = before
      await server.close()
    }
  })
})

describe("Download.downloadBlobs, a clone's large blob", () => {
  const chunkOf = (seed: number, size: number) => {
    const data = new Uint8Array(size)
    for (let i = 0; i < size; i++) data[i] = (i * 7 + seed * 13 + (i >> 9)) & 0xff
    return { data, hash: Objects.Blake3.hash(data) }
  }
  const parts = [chunkOf(1, 300_000), chunkOf(2, 250_000), chunkOf(3, 310_000)]
  const bytes = Buffer.concat(parts.map((part) => part.data))
  let offset = 0
  const chunks = parts.map((part) => ({ hash: part.hash, offset: (offset += part.data.length) - part.data.length, size: part.data.length }))

  /** The parts of the answers that paused them (their consumer answered a promise). */
  let paused = 0
  /** A server sending the asked chunks' bare frames in the order `order` gives, in network-sized parts. */
  const remoteSending = (order: (hashes: ReadonlyArray<string>) => ReadonlyArray<string>) =>
    ({
      site: "http://127.0.0.1:9",
      token: undefined,
      sendBinary: async (_path: string, init: StreamedInit) => {
        const hashes: ReadonlyArray<string> = JSON.parse(Buffer.from(init.body as Uint8Array).toString()).hashes
        const headers = { [Objects.Frames.HEADER]: Objects.Frames.BARE_V1 }
        const consumer = init.stream!(200, headers)!
        const wire = Buffer.concat(Objects.Frames.encodeBareFrames(order(hashes).map((hash) => ({ data: parts.find((p) => p.hash === hash)!.data, zstd: false }))))
        for (let at = 0; at < wire.length; at += 65_536) {
          const wait = consumer.part(wire.subarray(at, at + 65_536))
          if (wait !== undefined) paused++
          await wait
        }
        consumer.done()
        return { status: 200, headers, body: new Uint8Array(0) }
      }
    }) as unknown as RemoteRepo

  const download = (claimed: string, order: (hashes: ReadonlyArray<string>) => ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const dir = yield* tempDir("large-blob")
      // A clone places whole small blobs itself (placeBytes); a chunked one is reassembled in `dir`.
      const files = yield* downloadBlobs(remoteSending(order), [{ hash: claimed, size: bytes.length, chunks }], dir, () => false)
      return fs.readFileSync(files.get(claimed)!)
    })

  it.effect("is written as its chunks come, without pausing the answer, and verified whole, in order or not; one whose chunks do not make it fails", () =>
    Effect.gen(function*() {
      const blob = Objects.Blake3.hash(bytes)
      paused = 0
      expect((yield* download(blob, (hashes) => hashes)).equals(bytes)).toBe(true)
      // In order: hashed as written, never read back, so no part waits for the disk.
      expect(paused).toBe(0)
      // Out of order: read back and hashed once whole (the last part waits for that).
      expect((yield* download(blob, (hashes) => [...hashes].reverse())).equals(bytes)).toBe(true)
      expect(paused).toBe(1)
      // A chunk list that does not make the blob (a lying server): refused, whatever order its chunks come in.
      const other = Objects.Blake3.hash("another blob")
      for (const order of [(hashes: ReadonlyArray<string>) => hashes, (hashes: ReadonlyArray<string>) => [...hashes].reverse()]) {
        const failed = yield* Effect.flip(download(other, order))
        expect(failed.message).toContain(`blob ${other} reassembled to ${blob}: refusing corrupted content`)
      }
    }).pipe(Effect.scoped))
})
