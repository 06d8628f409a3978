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

/** A tree of one file `name`, and its hash. */
const tree = (name: string) => {
  const entries: ReadonlyArray<Objects.Tree.TreeEntry> = [{ name, kind: "blob", mode: "regular", hash: Objects.Blake3.hash("x") }]
  return { hash: Objects.Tree.hashTree(entries), entries }
}

describe("writeTrees", () => {
  it.effect("stores each tree once under its hash, readable again; a tree that does not hash to its name fails, the ones before it stored", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("write-trees")
      const [a, b, c, d] = [tree("a.txt"), tree("b.txt"), tree("c.txt"), tree("d.txt")]
      yield* openObjects(root).writeTrees([a, b, a])
      // Another process's store (nothing cached) reads them from their files.
      const again = openObjects(root)
      expect(yield* again.readTree(a.hash)).toEqual(a.entries)
      expect(yield* again.readTree(b.hash)).toEqual(b.entries)
      const forged = { hash: d.hash, entries: b.entries }
      const failed = yield* Effect.flip(again.writeTrees([c, forged]))
      expect([failed.code, failed.message]).toEqual(["bad_object", `tree ${d.hash} does not hash to its name`])
      // c came first and is stored; the forged one is not, and no temp file is left.
      const fresh = openObjects(root)
      expect(yield* fresh.readTree(c.hash)).toEqual(c.entries)
      expect(yield* fresh.readTree(d.hash)).toBeUndefined()
      const trees = path.join(objectsDir(root), "trees")
      expect(fs.readdirSync(trees).flatMap((dir) => fs.readdirSync(path.join(trees, dir))).filter((f) => f.endsWith(".tmp"))).toEqual([])
    }).pipe(Effect.scoped))

  it.effect("into a new checkout's store (fresh), each tree goes straight to its file, readable again; a forged one fails", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("write-trees-fresh")
      const [a, b, c] = [tree("a.txt"), tree("b.txt"), tree("c.txt")]
      yield* openObjects(root).writeTrees([a, b, a], true)
      const again = openObjects(root)
      expect(yield* again.readTree(a.hash)).toEqual(a.entries)
      expect(yield* again.readTree(b.hash)).toEqual(b.entries)
      const failed = yield* Effect.flip(openObjects(root).writeTrees([{ hash: c.hash, entries: b.entries }], true))
      expect([failed.code, failed.message]).toEqual(["bad_object", `tree ${c.hash} does not hash to its name`])
      expect(yield* openObjects(root).readTree(c.hash)).toBeUndefined()
      // Never over a file already there (a store that is not new after all): an error, the file as it was.
      const held = path.join(objectsDir(root), "trees", a.hash.slice(0, 2), a.hash)
      fs.writeFileSync(held, "kept")
      const refused = yield* Effect.flip(openObjects(root).writeTrees([a], true))
      expect(refused.code).toBe("local_io")
      expect(fs.readFileSync(held, "utf8")).toBe("kept")
    }).pipe(Effect.scoped))
})
