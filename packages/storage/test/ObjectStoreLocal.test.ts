import { assert } from "@effect/vitest"
import { Context, Effect, Layer, Stream } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { ObjectStore } from "../src/ObjectStore.ts"
import * as ObjectStoreLocal from "../src/ObjectStoreLocal.ts"
import { Boom, chunked, keyFor, objectStoreContract } from "./ObjectStore.contract.ts"

class Root extends Context.Service<Root, string>()("test/ObjectStoreLocal/Root") {}

const TestLayer = Layer.unwrap(Effect.gen(function*() {
  const root = yield* Effect.acquireRelease(
    Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "grove-objects-"))),
    (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
  )
  return Layer.merge(ObjectStoreLocal.layer({ root }), Layer.succeed(Root, root))
}))

objectStoreContract("local filesystem", TestLayer, {}, (it) => {
  it.effect("fans objects out by hash prefix and leaves no temp files behind", () =>
    Effect.gen(function*() {
      const store = yield* ObjectStore
      const root = yield* Root
      const bytes = randomBytes(3000)
      const key = keyFor(bytes, "acme")
      yield* store.put(key, chunked(bytes, 1000))
      const file = path.join(root, "acme", key.hash.slice(0, 2), key.hash.slice(2, 4), key.hash)
      assert.strictEqual((yield* Effect.promise(() => fs.readFile(file))).toString("hex"), bytes.toString("hex"))
      yield* Effect.flip(store.put(keyFor(randomBytes(8), "acme"), Stream.concat(Stream.succeed(bytes), Stream.fail(new Boom({ message: "x" })))))
      assert.deepStrictEqual(yield* Effect.promise(() => fs.readdir(path.join(root, ".tmp"))), [])
    }))

  it.effect("a delete removes the fan-out directories it emptied, never one still holding an object; puts beside deletes all land", () =>
    Effect.gen(function*() {
      const store = yield* ObjectStore
      const root = yield* Root
      const ns = path.join(root, "fans")
      const list = () => Effect.promise(() => fs.readdir(ns, { recursive: true }))
      const [a, b] = [randomBytes(100), randomBytes(100)]
      // Two objects in one fan-out: the first delete leaves the directory, the second removes both levels.
      const keyA = keyFor(a, "fans")
      const keyB = { namespace: "fans", hash: keyA.hash.slice(0, 4) + keyFor(b).hash.slice(4) }
      yield* store.put(keyA, Stream.succeed(a))
      yield* store.put(keyB, Stream.succeed(b))
      yield* store.delete(keyA)
      assert.deepStrictEqual((yield* list()).length, 3)
      yield* store.delete(keyB)
      assert.deepStrictEqual(yield* list(), [])
      // Puts and deletes of other keys in the same fan-out at once: every put lands and reads back.
      const prefix = keyA.hash.slice(0, 4)
      // (Each put is alone in the fan-out at times: a delete's rmdir lands between a put's mkdir and its link.)
      for (let round = 0; round < 30; round++) {
        const keys = Array.from({ length: 16 }, (_, i) => ({ namespace: "fans", hash: prefix + keyFor(Buffer.from(`${round}/${i}`)).hash.slice(4) }))
        yield* Effect.forEach(keys, (key, i) =>
          Effect.gen(function*() {
            yield* store.put(key, Stream.succeed(Buffer.from(String(i))))
            yield* store.delete(key)
            yield* store.put(key, Stream.succeed(Buffer.from(String(i))))
            if (i % 2 === 0) yield* store.delete(key)
          }), { concurrency: 16 })
        for (const [i, key] of keys.entries()) {
          assert.strictEqual(yield* store.has(key), i % 2 === 1)
          if (i % 2 === 1) yield* store.delete(key)
        }
      }
      // A put and a delete of the same key at once (gc sweeping an object as it is uploaded again): the put never
      // fails, whichever comes first; the delete may take the directory the put just linked into.
      for (let round = 0; round < 60; round++) {
        const key = { namespace: "fans", hash: prefix + keyFor(Buffer.from(`same/${round}`)).hash.slice(4) }
        yield* Effect.all([store.put(key, Stream.succeed(Buffer.from("x"))), store.delete(key)], { concurrency: 2 })
        yield* store.delete(key)
      }
    }))

  it.effect("removes stale temp files of a crashed writer at start", () =>
    Effect.gen(function*() {
      const root = yield* Root
      const stale = path.join(root, ".tmp", "stale")
      const fresh = path.join(root, ".tmp", "fresh")
      yield* Effect.promise(async () => {
        await fs.writeFile(stale, "x")
        await fs.writeFile(fresh, "x")
        const old = new Date(Date.now() - 2 * 60 * 60 * 1000)
        await fs.utimes(stale, old, old)
      })
      yield* ObjectStoreLocal.make({ root })
      const left = yield* Effect.promise(() => fs.readdir(path.join(root, ".tmp")))
      assert.deepStrictEqual(left, ["fresh"])
      yield* Effect.promise(() => fs.rm(fresh))
    }))

  it.effect("a range read after a delete is ObjectNotFound and no descriptor keeps the deleted file", () =>
    Effect.gen(function*() {
      const store = yield* ObjectStore
      const root = yield* Root
      const bytes = randomBytes(5000)
      const key = keyFor(bytes, "acme")
      yield* store.put(key, Stream.succeed(bytes))
      const file = path.join(root, "acme", key.hash.slice(0, 2), key.hash.slice(2, 4), key.hash)
      assert.deepStrictEqual(yield* store.getRange(key, 100, 50), new Uint8Array(bytes.subarray(100, 150)))
      assert.deepStrictEqual(yield* store.getRange(key, 4000, 1000), new Uint8Array(bytes.subarray(4000)))
      yield* store.delete(key)
      assert.strictEqual((yield* Effect.flip(store.getRange(key, 0, 10)))._tag, "ObjectNotFound")
      const held = yield* Effect.promise(async () => {
        const fds = await fs.readdir("/proc/self/fd").catch(() => [])
        const targets = await Promise.all(fds.map((fd) => fs.readlink(`/proc/self/fd/${fd}`).catch(() => "")))
        return targets.filter((target) => target.startsWith(file))
      })
      assert.deepStrictEqual(held, [])
      // The same key stored again reads again.
      yield* store.put(key, Stream.succeed(bytes))
      assert.deepStrictEqual(yield* store.getRange(key, 0, 10), new Uint8Array(bytes.subarray(0, 10)))
    }))
})
