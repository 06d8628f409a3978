import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Frames from "@grove/core/objects/Frames"
import { Effect, Layer, ManagedRuntime, References, Stream } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import * as http from "node:http"
import { answer } from "../http/RawRoutes.ts"
import { fetchSlices, FIRST_SLICE, slicedAnswer, writeSized } from "./ChunkFetchRoutes.ts"

const bytes = (length: number, fill: number) => new Uint8Array(length).fill(fill)
const joined = (pieces: ReadonlyArray<Uint8Array>) => Buffer.concat(pieces)

describe("writeSized", () => {
  it("joins neighbours up to the bound and passes a piece of the bound or more as it is", () => {
    const header = bytes(4, 1)
    const small = bytes(30, 2)
    const large = bytes(100, 3)
    const pieces: ReadonlyArray<Uint8Array> = [header, small, header, small, header, large, header, small, bytes(64, 4), header]
    const out = writeSized(pieces, 64)
    // The same bytes, in order.
    expect(joined(out)).toEqual(joined(pieces))
    expect(out.map((b) => b.length)).toEqual([38, 34, 100, 34, 64, 4])
    // No copy of a large piece, nor of a piece left alone.
    expect(out[2]).toBe(large)
    expect(out[5]).toBe(header)
    for (const buffer of out) expect(buffer.length <= 64 || pieces.includes(buffer)).toBe(true)
  })

  it("answers nothing for nothing, and one piece as it is", () => {
    expect(writeSized([], 64)).toEqual([])
    const one = bytes(10, 5)
    expect(writeSized([one], 64)).toEqual([one])
    expect(writeSized([one], 64)[0]).toBe(one)
  })
})

describe("fetchSlices", () => {
  it("cuts a keyed fetch's hashes in a small first slice, then slices of one statement each, in order", () => {
    const hashes = Array.from({ length: 4_500 }, (_, i) => i)
    const slices = fetchSlices(hashes)
    expect(slices.map((s) => s.length)).toEqual([FIRST_SLICE, 2_000, 2_000, 4_500 - FIRST_SLICE - 4_000])
    expect(slices.flat()).toEqual(hashes)
    expect(fetchSlices(hashes.slice(0, 10))).toEqual([hashes.slice(0, 10)])
    expect(fetchSlices(hashes.slice(0, FIRST_SLICE + 1)).map((s) => s.length)).toEqual([FIRST_SLICE, 1])
    expect(fetchSlices([])).toEqual([])
  })
})

/**
 * The keyed fetch's answer served by platform-node's HTTP server (as grove-server serves it), with a stand-in for a
 * slice's locate and read: the chunk `h<i>` is `i` as 4 bytes.
 */
describe("slicedAnswer", () => {
  const hashes = Array.from({ length: FIRST_SLICE + 2_000 + 44 }, (_, i) => `h${i}`)
  const chunkOf = (hash: string): Frames.Frame => {
    const data = new Uint8Array(4)
    new DataView(data.buffer).setUint32(0, Number(hash.slice(1)))
    return { hash, data }
  }
  const dbDown = new SqlError({ reason: new UnknownError({ cause: new Error("connection terminated"), message: "connection terminated" }) })

  /** Waits for `promise`, at most 3 s (an answer that locates every slice before it starts would wait forever). */
  const waitFor = (promise: Promise<void>) => Effect.promise(() => Promise.race([promise, new Promise((r) => setTimeout(r, 3_000))]))

  /** Serves `sliceChunks`'s answer to hashes at POST /fetch on 127.0.0.1; the first slice is the one of index 0. */
  const serve = async (sliceChunks: (index: number, slice: ReadonlyArray<string>) => Effect.Effect<void, SqlError>) => {
    let index = 0
    const route = HttpRouter.add(
      "POST",
      "/fetch",
      answer(slicedAnswer(hashes, (slice) => Effect.as(sliceChunks(index++, slice), Stream.fromIterable(slice.map(chunkOf))), false, false))
    )
    const runtime = ManagedRuntime.make(
      HttpRouter.serve(route, { disableLogger: true, disableListenLog: true }).pipe(
        Layer.provideMerge(NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })),
        // The failures are the point: not logged.
        Layer.provide(Layer.succeed(References.MinimumLogLevel, "None"))
      )
    )
    const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (server) => server.address))
    return { url: `http://127.0.0.1:${(address as { port: number }).port}/fetch`, close: () => runtime.dispose() }
  }

  /** The frames of the answer as they arrive (`onFrame` with how many came), and how the body ended. */
  const read = async (url: string, onFrame: (count: number) => void = () => undefined) => {
    const response = await fetch(url, { method: "POST" })
    const frames: Array<Frames.Frame> = []
    try {
      for await (const frame of Frames.decodeFrames(response.body! as AsyncIterable<Uint8Array>)) {
        frames.push(frame)
        onFrame(frames.length)
      }
      return { status: response.status, frames, broken: undefined }
    } catch (error) {
      return { status: response.status, frames, broken: error as Error }
    }
  }

  it("answers every chunk in request order, and locates a slice only once the slices before it have reached the client", async () => {
    const firstArrived = Promise.withResolvers<void>()
    const located: Array<{ index: number; size: number; firstArrived: boolean }> = []
    let arrived = false
    const server = await serve((index, slice) =>
      Effect.gen(function*() {
        // A later slice waits until the client has every frame of the first.
        if (index > 0) yield* waitFor(firstArrived.promise)
        located.push({ index, size: slice.length, firstArrived: arrived })
      })
    )
    try {
      const { status, frames, broken } = await read(server.url, (count) => {
        if (count === FIRST_SLICE) {
          arrived = true
          firstArrived.resolve()
        }
      })
      expect(status).toBe(200)
      expect(broken).toBeUndefined()
      expect(frames.map((f) => f.hash)).toEqual(hashes)
      expect(frames.map((f) => Buffer.from(f.data))).toEqual(hashes.map((h) => Buffer.from(chunkOf(h).data)))
      expect(located).toEqual([
        { index: 0, size: FIRST_SLICE, firstArrived: false },
        { index: 1, size: 2_000, firstArrived: true },
        { index: 2, size: 44, firstArrived: true }
      ])
    } finally {
      await server.close()
    }
  }, 30_000)

  it("breaks the answer when a later slice's database fails, never ends it short and clean", async () => {
    const firstArrived = Promise.withResolvers<void>()
    // The second slice fails once the client has the first's frames (before that the socket closes with no answer).
    const server = await serve((index) =>
      index === 1 ? Effect.andThen(waitFor(firstArrived.promise), Effect.fail(dbDown)) : Effect.void
    )
    try {
      const { status, frames, broken } = await read(server.url, (count) => count === FIRST_SLICE && firstArrived.resolve())
      expect(status).toBe(200)
      // The client sees a broken body ("terminated") after the first slice's frames.
      expect(broken).toBeInstanceOf(Error)
      expect(frames.map((f) => f.hash)).toEqual(hashes.slice(0, FIRST_SLICE))
    } finally {
      await server.close()
    }
  }, 30_000)

  it("answers 503 when the first slice's database fails, before the answer starts", async () => {
    const server = await serve((index) => index === 0 ? Effect.fail(dbDown) : Effect.void)
    try {
      const response = await fetch(server.url, { method: "POST" })
      expect(response.status).toBe(503)
      expect(await response.json()).toMatchObject({ code: "unavailable", retryable: true })
    } finally {
      await server.close()
    }
  }, 30_000)
})
