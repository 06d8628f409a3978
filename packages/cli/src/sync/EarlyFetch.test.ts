import { describe, expect, it } from "@effect/vitest"
import type { IncomingBlob } from "./Download.ts"
import { fetchEarly } from "./EarlyFetch.ts"
import type { RemoteRepo, StreamedInit } from "./RemoteRepo.ts"

const hashOf = (i: number) => i.toString(16).padStart(64, "0")

describe("EarlyFetch.fetchEarly", () => {
  it("sends a clone's first chunk requests before it returns (a plain hash list needs no answer first)", () => {
    const sent: Array<{ readonly path: string; readonly init: StreamedInit }> = []
    // A server on this machine: the hash lists go plain, so nothing is awaited before sending.
    const remote = {
      site: "http://127.0.0.1:9",
      token: undefined,
      sendBinary: (path: string, init: StreamedInit) => {
        sent.push({ path, init })
        return new Promise(() => {})
      }
    } as unknown as RemoteRepo
    // 5,000 single-chunk blobs of 8 KiB: three batches of 2,048 hashes (16 MiB), the first three sent early.
    const wanted: Array<IncomingBlob> = Array.from({ length: 5000 }, (_, i) => ({
      hash: hashOf(i + 1),
      size: 8192,
      chunks: [{ hash: hashOf(i + 1), offset: 0, size: 8192 }]
    }))
    const early = fetchEarly(remote, new Map(), wanted)
    // Before any promise settles: the caller goes on to check the pull answer (~20 ms) with them on the wire.
    expect(sent.map((s) => s.path)).toEqual(["chunks/fetch", "chunks/fetch", "chunks/fetch"])
    expect(sent.map((s) => JSON.parse(Buffer.from(s.init.body as Uint8Array).toString()).hashes)).toEqual(early!.batches.slice(0, 3))
    early!.cancel()
    expect(sent.every((s) => s.init.signal?.aborted === true)).toBe(true)
  })
})
