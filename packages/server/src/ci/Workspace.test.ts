/**
 * Workspace.remove: a small directory goes in one go on the calling thread, a larger one as before; either way
 * all of it goes, and never what a symlink in it points to.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { remove } from "./Workspace.ts"

const scratch = () => fs.mkdtempSync(path.join(os.tmpdir(), "grove-workspace-test-"))

/** A job's leftovers: nested directories, `files` files, and symlinks to a file and a directory outside. */
const leftovers = (outside: string, files: number) => {
  const dir = scratch()
  fs.mkdirSync(path.join(dir, ".oak/workflows"), { recursive: true })
  for (let i = 0; i < files; i++) fs.writeFileSync(path.join(dir, ".oak/workflows", `w${i}.yml`), "on: [manual]\n")
  fs.symlinkSync(outside, path.join(dir, "linked-dir"))
  fs.symlinkSync(path.join(outside, "keep.txt"), path.join(dir, ".oak/linked-file"))
  return dir
}

describe("Workspace.remove", () => {
  it.effect("removes a small directory and a large one whole, never a symlink's target", () =>
    Effect.gen(function*() {
      const outside = scratch()
      fs.writeFileSync(path.join(outside, "keep.txt"), "kept\n")
      // Many entries behind the symlink: counted, they would make the small directory look large.
      for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(outside, `other${i}`), "")
      try {
        for (const files of [3, 60]) {
          const dir = leftovers(outside, files)
          yield* remove(dir)
          expect(fs.existsSync(dir)).toBe(false)
        }
        expect(fs.readFileSync(path.join(outside, "keep.txt"), "utf8")).toBe("kept\n")
        expect(fs.readdirSync(outside)).toHaveLength(41)
      } finally {
        fs.rmSync(outside, { recursive: true, force: true })
      }
    }))

  it.effect("a directory that is not there is no error", () =>
    Effect.gen(function*() {
      const dir = scratch()
      fs.rmdirSync(dir)
      yield* remove(dir)
      expect(fs.existsSync(dir)).toBe(false)
    }))
})
