import { describe, expect, it } from "@effect/vitest"
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { zstdDecompressSync } from "node:zlib"
import { fetchRequest } from "./Download.ts"
import type { RemoteRepo } from "./RemoteRepo.ts"

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
