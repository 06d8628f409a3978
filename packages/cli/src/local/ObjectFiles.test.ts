import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { ObjectReader } from "../sync/Outgoing.ts"
import { treesToSend } from "../sync/Outgoing.ts"
import { blobPath, commitPath, dropAllKeptBlobs, objectsDir, readCommitFile, readCommitManifest, REMOVE_AFTER_MS, treePath } from "./ObjectFiles.ts"

const hash = (c: string) => c.repeat(64)

const withRoot = (f: (root: string) => void) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-object-files-"))
  try {
    f(root)
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

const writeCommit = (root: string, text: string, at: string) => {
  fs.mkdirSync(path.dirname(commitPath(root, at)), { recursive: true })
  fs.writeFileSync(commitPath(root, at), text)
}

describe("readCommitManifest", () => {
  it("reads the manifest hash from the head of a commit file, as the whole file says it", () =>
    withRoot((root) => {
      const files = Array.from({ length: 3_000 }, (_, i) => ({ path: `f${i}.txt`, change_type: "added", old_blob_hash: null, new_blob_hash: hash("e") }))
      const cases: Array<[string, Record<string, unknown>]> = [
        ["written by Commit.ts", { hash: hash("a"), branch_name: "u-x", parent_hash: null, manifest_hash: hash("b"), author: "u", files }],
        // A branch name that spells the key inside a string must not be taken for it.
        ["a tricky string before it", { hash: hash("a"), branch_name: `x","manifest_hash":"${hash("d")}\\"`, parent_hash: hash("c"), manifest_hash: hash("b"), files }],
        // Another field order (a commit from the server): the whole file says it.
        ["files first", { hash: hash("a"), files, manifest_hash: hash("b") }],
        ["manifest first", { manifest_hash: hash("b"), hash: hash("a"), files }]
      ]
      for (const [label, commit] of cases) {
        writeCommit(root, JSON.stringify({ commit, new_trees: [] }), hash("a"))
        expect({ label, manifest: readCommitManifest(root, hash("a")) }).toEqual({ label, manifest: readCommitFile(root, hash("a"))!.commit.manifest_hash })
        expect(readCommitManifest(root, hash("a"))).toBe(hash("b"))
      }
      // The file of another commit (its own hash differs): not trusted by its head.
      writeCommit(root, JSON.stringify({ commit: { hash: hash("f"), parent_hash: null, manifest_hash: hash("9") } }), hash("a"))
      expect(readCommitManifest(root, hash("a"))).toBe(hash("9")) // as readCommitFile reads it
      expect(readCommitManifest(root, hash("0"))).toBeUndefined()
    }))

  it("treesToSend asks a reader for its parents' manifests alone when it can (not the whole commit)", () =>
    withRoot((root) => {
      const tree = (h: string) => ({ hash: h, entries: [] })
      const commit = { hash: hash("a"), parent_hash: hash("c"), manifest_hash: hash("b"), files: [] }
      const reader: ObjectReader = {
        root,
        readCommit: () => {
          throw new Error("the parent commit was read whole")
        },
        readManifest: (h) => (h === hash("c") ? hash("d") : undefined),
        readTree: (h) => (h === hash("b") || h === hash("d") ? tree(h).entries : undefined),
        keptBlobSize: () => undefined
      }
      expect(treesToSend(reader, [commit as never])).toEqual([{ hash: hash("b"), entries: [] }])
    }))

  it("object paths are path.join's, for each checkout in turn (the objects directory is joined once per root)", () => {
    const roots = ["/tmp/a", "/tmp/b/", "relative/c", "/tmp/a", "/tmp//d/../e", "/tmp/b/"]
    for (const root of roots) {
      expect({ root, dir: objectsDir(root) }).toEqual({ root, dir: path.join(root, ".grove", "objects") })
      expect(blobPath(root, hash("a"))).toBe(path.join(root, ".grove", "objects", "blobs", hash("a")))
      expect(treePath(root, hash("b"))).toBe(path.join(root, ".grove", "objects", "trees", hash("b").slice(0, 2), hash("b")))
    }
  })
})

describe("dropAllKeptBlobs", () => {
  it("moves many kept blobs away at once; its detached remover removes them and an earlier trash whole, not at once", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-object-files-"))
    try {
      const leftover = path.join(objectsDir(root), "trash-1-1", "sub")
      fs.mkdirSync(leftover, { recursive: true })
      for (let i = 0; i < 50; i++) fs.writeFileSync(path.join(leftover, String(i)), "x")
      fs.mkdirSync(path.dirname(blobPath(root, hash("a"))), { recursive: true })
      for (let i = 0; i < 300; i++) fs.writeFileSync(blobPath(root, i.toString(16).padStart(64, "0")), "blob")
      const dropped = performance.now()
      dropAllKeptBlobs(root)
      expect(fs.existsSync(path.join(objectsDir(root), "blobs"))).toBe(false)
      const trash = () => fs.readdirSync(objectsDir(root)).filter((name) => name.startsWith("trash-"))
      // It waits first (REMOVE_AFTER_MS), out of the way of the command that follows: no file of the trash goes before
      // then (a remover starting at once unlinks these 350 files within a few hundred ms). Watched until it is gone: the
      // first change seen can only be late, never early, however loaded the machine is (a look at a fixed time could
      // come after the wait on a busy machine).
      const files = (name: string) => fs.existsSync(path.join(objectsDir(root), name)) ? fs.readdirSync(path.join(objectsDir(root), name)).length : 0
      const intact = () => JSON.stringify(trash().map(files).sort((a, b) => a - b)) === "[1,300]" // the earlier trash's "sub", this push's blobs
      let firstChange: number | undefined
      // The remover (`node -e` of a script in a string) runs on its own: wait for it, however loaded the machine is.
      for (let waited = 0; trash().length > 0 && waited < 60_000; waited += 50) {
        if (firstChange === undefined && !intact()) firstChange = performance.now()
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      expect(trash()).toEqual([])
      expect(firstChange ?? performance.now()).toBeGreaterThanOrEqual(dropped + REMOVE_AFTER_MS)
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  }, 90_000)
})
