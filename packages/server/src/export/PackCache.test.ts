import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { buildPack } from "./GitPack.ts"
import { PackCache } from "./PackCache.ts"
import { makeTestHistory } from "./TestSnapshot.ts"
import { tempDir } from "./TestTools.ts"

const files = (dir: string) => Effect.promise(async () => (await fs.promises.readdir(dir)).sort())

describe("PackCache", () => {
  it.live("builds once for concurrent requests, then serves the stored pack", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const cache = yield* PackCache.make({ dir: path.join(dir, "cache", "git") })
      const { source, history } = makeTestHistory()
      let builds = 0
      const build = (tmp: string) =>
        Effect.gen(function*() {
          builds++
          const { headSha, objectCount } = yield* buildPack(source, history, tmp)
          return { headSha, objectCount }
        })
      const key = history.at(-1)!.hash
      const results = yield* Effect.all([1, 2, 3, 4].map(() => cache.getOrBuild(key, build)), { concurrency: "unbounded" })
      assert.strictEqual(builds, 1)
      for (const r of results) assert.deepStrictEqual(r, results[0])
      const again = yield* cache.getOrBuild(key, build)
      assert.strictEqual(builds, 1)
      assert.deepStrictEqual(again, results[0])
      assert.strictEqual(again.meta.objectCount, 26)
      const pack = yield* Effect.promise(() => fs.promises.readFile(again.path))
      assert.strictEqual(pack.subarray(0, 4).toString(), "PACK")
      assert.deepStrictEqual(yield* files(cache.dir), [`v1-${key}.json`, `v1-${key}.pack`])
    }).pipe(Effect.scoped))

  it.live("keeps the most recently used packs, removes temp files of failed builds, refuses odd keys", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const cache = yield* PackCache.make({ dir, maxEntries: 2 })
      const build = (tmp: string) => Effect.promise(() => fs.promises.writeFile(tmp, tmp)).pipe(Effect.as({ ok: true }))
      yield* cache.getOrBuild("a", build)
      yield* Effect.sleep("20 millis")
      yield* cache.getOrBuild("b", build)
      yield* Effect.sleep("20 millis")
      yield* cache.getOrBuild("a", build) // a is now the most recently used
      yield* Effect.sleep("20 millis")
      yield* cache.getOrBuild("c", build)
      assert.deepStrictEqual(yield* files(dir), ["v1-a.json", "v1-a.pack", "v1-c.json", "v1-c.pack"])

      const failed = yield* Effect.flip(cache.getOrBuild("d", (tmp) =>
        Effect.promise(() => fs.promises.writeFile(tmp, "partial")).pipe(Effect.andThen(Effect.fail("boom" as const)))))
      assert.strictEqual(failed, "boom")
      assert.deepStrictEqual(yield* files(dir), ["v1-a.json", "v1-a.pack", "v1-c.json", "v1-c.pack"])

      const odd = yield* Effect.flip(cache.getOrBuild("../x", build))
      assert.strictEqual((odd as { _tag: string })._tag, "ExportError")
    }).pipe(Effect.scoped))

  it.live("finishes a build whose requester went away", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const cache = yield* PackCache.make({ dir })
      const build = (tmp: string) =>
        Effect.sleep("100 millis").pipe(Effect.andThen(Effect.promise(() => fs.promises.writeFile(tmp, "x"))), Effect.as(1))
      const fiber = yield* Effect.forkChild(cache.getOrBuild("k", build))
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(fiber)
      const later = yield* cache.getOrBuild("k", () => Effect.die("built twice"))
      assert.strictEqual(later.meta, 1)
    }).pipe(Effect.scoped))
})
