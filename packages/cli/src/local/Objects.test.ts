import { describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import { blobPath, openObjects } from "./Objects.ts"

/** Keeps `count` distinct blobs in the checkout at `root`; answers their hashes. */
const keep = (root: string, count: number) =>
  Effect.gen(function*() {
    const objects = openObjects(root)
    const hashes: Array<string> = []
    for (let i = 0; i < count; i++) {
      const bytes = new TextEncoder().encode(`blob ${i}`)
      const hash = Objects.Blake3.hash(bytes)
      yield* objects.keepBlobBytes(hash, bytes)
      hashes.push(hash)
    }
    return { objects, hashes }
  })

const objectsDir = (root: string) => path.join(root, ".grove", "objects")

describe("dropping kept blobs after a push", () => {
  it.effect("a few are removed by the command itself: nothing left behind, no trash for a background process", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("drop-few")
      const { hashes, objects } = yield* keep(root, 3)
      expect(hashes.every((h) => fs.existsSync(blobPath(root, h)))).toBe(true)
      yield* objects.dropAllBlobs
      expect(fs.readdirSync(objectsDir(root))).toEqual([])
    }).pipe(Effect.scoped))

  it.live("many are moved aside at once and removed by a detached process", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("drop-many")
      const { hashes, objects } = yield* keep(root, 100)
      yield* objects.dropAllBlobs
      // Gone from where pushes look at once; the trash directory goes when the background removal ends.
      expect(hashes.some((h) => fs.existsSync(blobPath(root, h)))).toBe(false)
      const deadline = Date.now() + 60_000
      while (fs.readdirSync(objectsDir(root)).length > 0 && Date.now() < deadline) {
        yield* Effect.promise(() => new Promise((done) => setTimeout(done, 50)))
      }
      expect(fs.readdirSync(objectsDir(root))).toEqual([])
    }).pipe(Effect.scoped), 90_000)
})
