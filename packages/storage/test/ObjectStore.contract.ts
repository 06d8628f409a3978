/**
 * The behaviour every ObjectStore must have. Each implementation's test file
 * calls `objectStoreContract` with a layer; `extra` adds tests that need
 * implementation details, sharing the same (possibly expensive) layer.
 */
import { assert, describe, layer } from "@effect/vitest"
import type { Vitest } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schema, Stream } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { type ObjectKey, ObjectStore, type ObjectStoreError } from "../src/ObjectStore.ts"

const MiB = 1024 * 1024

export class Boom extends Schema.TaggedError<Boom>()("Boom", { message: Schema.String }) {}

export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

/** A fresh key in `namespace` whose hash is the content's SHA-256 (the store does not check it, but it keeps keys unique). */
export const keyFor = (bytes: Uint8Array, namespace = "contract"): ObjectKey => ({ namespace, hash: sha256(bytes) })

export const randomKey = (namespace = "contract"): ObjectKey => ({ namespace, hash: sha256(randomBytes(32)) })

/** Splits bytes into chunks of at most `size`. */
export const chunked = (bytes: Uint8Array, size: number): Stream.Stream<Uint8Array> =>
  Stream.fromIterable(Array.from({ length: Math.ceil(bytes.byteLength / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size)))

export const collect = (stream: Stream.Stream<Uint8Array, unknown>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Array.from(chunks)))

/** A full garbage collection, so live memory can be measured rather than garbage that is not collected yet. */
const collectGarbage: () => void = (() => {
  v8.setFlagsFromString("--expose-gc")
  return vm.runInNewContext("gc") as () => void
})()

/** Bytes held in live ArrayBuffers (Node's Buffers), after a full collection. */
const liveBufferBytes = () => {
  collectGarbage()
  return process.memoryUsage().arrayBuffers
}

/** Records the peak of live buffer memory above a baseline, sampled at checkpoints during a transfer. */
const livePeak = () => {
  const baseline = liveBufferBytes()
  let peak = 0
  return {
    checkpoint: () => {
      peak = Math.max(peak, liveBufferBytes() - baseline)
    },
    peak: () => peak
  }
}

/**
 * `total` random bytes, generated chunk by chunk as they are pulled, with their
 * running SHA-256; `onChunk` runs before each chunk is made.
 */
const lazyRandom = (total: number, chunkSize: number, onChunk: (index: number) => void = () => {}) => {
  const hash = createHash("sha256")
  const pulled = { chunks: 0 }
  const stream = Stream.unfold(0, (offset: number) =>
    Effect.sync(() => {
      if (offset >= total) return undefined
      onChunk(pulled.chunks)
      const chunk = randomBytes(Math.min(chunkSize, total - offset))
      hash.update(chunk)
      pulled.chunks++
      return [chunk, offset + chunk.byteLength] as const
    }))
  return { stream, digest: () => hash.digest("hex"), pulled }
}

const expectInvalidKey = <A, R>(effect: Effect.Effect<A, ObjectStoreError | { readonly _tag: string }, R>) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    assert.strictEqual(error._tag, "ObjectStoreError")
    assert.strictEqual((error as ObjectStoreError).reason, "InvalidKey")
  })

const INVALID_KEYS: ReadonlyArray<unknown> = [
  { namespace: "", hash: "a".repeat(64) },
  { namespace: "Org", hash: "a".repeat(64) },
  { namespace: "-org", hash: "a".repeat(64) },
  { namespace: "_org", hash: "a".repeat(64) },
  { namespace: ".tmp", hash: "a".repeat(64) },
  { namespace: "..", hash: "a".repeat(64) },
  { namespace: "a/b", hash: "a".repeat(64) },
  { namespace: "../../etc", hash: "a".repeat(64) },
  { namespace: "a".repeat(65), hash: "a".repeat(64) },
  { namespace: "org\n", hash: "a".repeat(64) },
  { namespace: "org", hash: "a".repeat(63) },
  { namespace: "org", hash: "a".repeat(65) },
  { namespace: "org", hash: "A".repeat(64) },
  { namespace: "org", hash: "g".repeat(64) },
  { namespace: "org", hash: `../${"a".repeat(61)}` },
  { namespace: "org", hash: `${"a".repeat(63)}/` },
  { namespace: "org", hash: `${"a".repeat(64)}\n` },
  { namespace: "org" },
  { hash: "a".repeat(64) },
  { namespace: 1, hash: "a".repeat(64) },
  null,
  "org/aaaa"
]

export interface ContractOptions {
  /** Size of the large streamed object; default 64 MiB. */
  readonly largeObjectBytes?: number
  /** For building the layer (e.g. a server build on a clean machine). */
  readonly timeout?: number
}

export const objectStoreContract = <R, E>(
  name: string,
  storeLayer: Layer.Layer<ObjectStore | R, E>,
  options: ContractOptions = {},
  extra?: (it: Vitest.MethodsNonLive<ObjectStore | R>) => void
) => {
  const large = options.largeObjectBytes ?? 64 * MiB
  // The live clock: stores talk to real servers and files.
  layer(storeLayer, { excludeTestServices: true, timeout: options.timeout ?? 120_000 })(`ObjectStore contract: ${name}`, (it) => {
    it.effect("round-trips bytes, whatever the chunking, including empty objects", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        for (const [bytes, chunk] of [[randomBytes(100_000), 7_000], [randomBytes(1), 1], [new Uint8Array(0), 1]] as const) {
          const key = randomKey()
          const result = yield* store.put(key, chunked(bytes, chunk))
          assert.deepStrictEqual(result, { size: bytes.byteLength, created: true })
          const back = yield* collect(store.get(key))
          assert.strictEqual(sha256(back), sha256(bytes))
          assert.strictEqual(back.byteLength, bytes.byteLength)
          assert.strictEqual(yield* store.size(key), bytes.byteLength)
        }
      }))

    it.effect("reads a byte range of an object, and fails past its end or for a missing one", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const bytes = randomBytes(300_000)
        const key = keyFor(bytes)
        yield* store.put(key, chunked(bytes, 64 * 1024))
        assert.isTrue(Buffer.from(yield* store.getRange(key, 0, 10)).equals(bytes.subarray(0, 10)))
        assert.isTrue(Buffer.from(yield* store.getRange(key, 123_456, 100_000)).equals(bytes.subarray(123_456, 223_456)))
        assert.strictEqual((yield* store.getRange(key, 5, 0)).length, 0)
        const past = yield* Effect.flip(store.getRange(key, 299_990, 100))
        assert.strictEqual(past._tag, "ObjectStoreError")
        const missing = yield* Effect.flip(store.getRange(randomKey(), 0, 1))
        assert.strictEqual(missing._tag, "ObjectNotFound")
      }))

    it.effect("put is idempotent: an existing object is kept and the new body is not read", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const bytes = randomBytes(50_000)
        const key = keyFor(bytes)
        assert.deepStrictEqual(yield* store.put(key, Stream.succeed(bytes)), { size: 50_000, created: true })
        const again = yield* store.put(key, Stream.fail(new Boom({ message: "must not be read" })))
        assert.deepStrictEqual(again, { size: 50_000, created: false })
        assert.strictEqual(sha256(yield* collect(store.get(key))), key.hash)
      }))

    it.effect("has, size and delete (delete is idempotent)", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const bytes = randomBytes(1234)
        const key = keyFor(bytes)
        assert.isFalse(yield* store.has(key))
        yield* store.put(key, Stream.succeed(bytes))
        assert.isTrue(yield* store.has(key))
        assert.strictEqual(yield* store.size(key), 1234)
        yield* store.delete(key)
        assert.isFalse(yield* store.has(key))
        yield* store.delete(key)
        // The same object in another namespace is another object.
        yield* store.put({ namespace: "other-org", hash: key.hash }, Stream.succeed(bytes))
        assert.isFalse(yield* store.has(key))
        assert.isTrue(yield* store.has({ namespace: "other-org", hash: key.hash }))
      }))

    it.effect("namespaces lists those holding objects; deleteNamespace empties one, answering how many it held", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const [gone, kept] = [`gone-${randomBytes(4).toString("hex")}`, `kept-${randomBytes(4).toString("hex")}`]
        const keys = [randomKey(gone), randomKey(gone), randomKey(gone), randomKey(kept)]
        for (const key of keys) yield* store.put(key, Stream.succeed(randomBytes(10)))
        const before = yield* store.namespaces
        assert.includeMembers([...before], [gone, kept])
        assert.strictEqual(yield* store.deleteNamespace(gone), 3)
        for (const key of keys.slice(0, 3)) assert.isFalse(yield* store.has(key))
        assert.isTrue(yield* store.has(keys[3]!))
        const after = yield* store.namespaces
        assert.notInclude([...after], gone)
        assert.include([...after], kept)
        assert.strictEqual(yield* store.deleteNamespace(gone), 0)
        const invalid = yield* Effect.flip(store.deleteNamespace("../x"))
        assert.strictEqual(invalid.reason, "InvalidKey")
      }))

    it.effect("a missing object is ObjectNotFound for get and size", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const key = randomKey()
        const getError = yield* Effect.flip(Stream.runDrain(store.get(key)))
        assert.strictEqual(getError._tag, "ObjectNotFound")
        const sizeError = yield* Effect.flip(store.size(key))
        assert.strictEqual(sizeError._tag, "ObjectNotFound")
        if (sizeError._tag === "ObjectNotFound") {
          assert.deepStrictEqual([sizeError.namespace, sizeError.hash], [key.namespace, key.hash])
        }
      }))

    it.effect("rejects invalid keys on every operation without reading the body", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        let reads = 0
        const body = Stream.fromEffect(Effect.sync(() => {
          reads++
          return new Uint8Array(1)
        }))
        for (const bad of INVALID_KEYS) {
          const key = bad as ObjectKey
          yield* expectInvalidKey(store.put(key, body))
          yield* expectInvalidKey(Stream.runDrain(store.get(key)))
          yield* expectInvalidKey(store.has(key))
          yield* expectInvalidKey(store.size(key))
          yield* expectInvalidKey(store.delete(key))
        }
        assert.strictEqual(reads, 0)
      }))

    for (const [label, bytes] of [["small", 200_000], ["multi-part", 12 * MiB]] as const) {
      it.effect(`concurrent puts of one ${label} object: all succeed, exactly one creates it`, () =>
        Effect.gen(function*() {
          const store = yield* ObjectStore
          const content = randomBytes(bytes)
          const key = keyFor(content)
          const results = yield* Effect.forEach(
            Array.from({ length: 6 }),
            () => store.put(key, chunked(content, 256 * 1024)),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((r) => r.created).length, 1)
          for (const result of results) assert.strictEqual(result.size, bytes)
          assert.strictEqual(sha256(yield* collect(store.get(key))), key.hash)
        }), 60_000)
    }

    it.effect(`streams a large object (${large / MiB} MiB) both ways with bounded memory`, () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const key = randomKey()
        // Every 8 MiB, the live memory is measured after a full GC: an implementation holding the
        // object (or most of it) whole cannot stay under the bound, whatever the GC timing.
        const putMemory = livePeak()
        const source = lazyRandom(large, MiB, (index) => index % 8 === 7 && putMemory.checkpoint())
        const started = Date.now()
        const put = yield* store.put(key, source.stream)
        const putMs = Date.now() - started
        putMemory.checkpoint()
        assert.deepStrictEqual(put, { size: large, created: true })

        const getMemory = livePeak()
        const hash = createHash("sha256")
        let largestChunk = 0
        let total = 0
        let nextCheckpoint = 8 * MiB
        const getStarted = Date.now()
        yield* Stream.runForEach(store.get(key), (chunk) =>
          Effect.sync(() => {
            hash.update(chunk)
            largestChunk = Math.max(largestChunk, chunk.byteLength)
            total += chunk.byteLength
            if (total >= nextCheckpoint) {
              nextCheckpoint += 8 * MiB
              getMemory.checkpoint()
            }
          }))
        const getMs = Date.now() - getStarted
        assert.strictEqual(total, large)
        assert.strictEqual(hash.digest("hex"), source.digest())
        assert.isAtMost(largestChunk, 16 * MiB)
        // Measured: S3 holds at most a part or two (8-22 MiB with 8 MiB parts), the filesystem about a chunk;
        // holding the object whole would reach nearly `large` by the last checkpoint.
        assert.isBelow(putMemory.peak(), large / 2, `put held ${putMemory.peak()} bytes`)
        assert.isBelow(getMemory.peak(), large / 2, `get held ${getMemory.peak()} bytes`)

        // Reading only the start ends the download early.
        const head = yield* Stream.runCollect(Stream.take(store.get(key), 1))
        assert.strictEqual(head.length, 1)

        const rate = (ms: number) => (large / MiB / (ms / 1000)).toFixed(0)
        yield* Effect.sync(() =>
          console.log(
            `[${name}] ${large / MiB} MiB: put ${putMs} ms (${rate(putMs)} MiB/s, peak live buffers ` +
              `${(putMemory.peak() / MiB).toFixed(1)} MiB), get ${getMs} ms (${rate(getMs)} MiB/s, peak live buffers ` +
              `${(getMemory.peak() / MiB).toFixed(1)} MiB, largest chunk ${(largestChunk / 1024).toFixed(0)} KiB)`
          )
        )
        yield* store.delete(key)
      }), 120_000)

    it.effect("an upstream failure fails the put with that error and leaves nothing visible", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const key = randomKey()
        // Past one S3 part, so a multipart upload is under way when the body fails.
        const body = Stream.concat(lazyRandom(12 * MiB, MiB).stream, Stream.fail(new Boom({ message: "upstream" })))
        const error = yield* Effect.flip(store.put(key, body))
        assert.strictEqual(error._tag, "Boom")
        assert.isFalse(yield* store.has(key))
        assert.strictEqual((yield* Effect.flip(Stream.runDrain(store.get(key))))._tag, "ObjectNotFound")
        // The key stays usable.
        const bytes = randomBytes(10)
        assert.isTrue((yield* store.put(key, Stream.succeed(bytes))).created)
      }))

    it.effect("an interrupted put leaves nothing visible", () =>
      Effect.gen(function*() {
        const store = yield* ObjectStore
        const key = randomKey()
        const source = lazyRandom(10 * MiB, MiB)
        const reading = yield* Deferred.make<void>()
        const body = Stream.concat(
          source.stream,
          Stream.fromEffect(Effect.andThen(Deferred.succeed(reading, undefined), Effect.never))
        )
        const fiber = yield* Effect.forkChild(store.put(key, body))
        yield* Deferred.await(reading)
        yield* Fiber.interrupt(fiber)
        assert.strictEqual(source.pulled.chunks, 10)
        assert.isFalse(yield* store.has(key))
      }))

    if (extra !== undefined) describe("implementation details", () => extra(it))
  })
}
