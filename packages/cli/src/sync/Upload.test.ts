import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { readRange } from "./Upload.ts"

describe("Upload.readRange", () => {
  // Small ranges are read synchronously, large ones through fs.promises: both give the exact bytes or fail.
  it.effect("reads a range byte-exactly at any offset, small (sync) and large, and fails on a file shorter than expected", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-upload-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const file = path.join(dir, "data")
      const bytes = new Uint8Array(1024 * 1024 + 333).map((_, i) => (i * 131 + (i >> 9)) % 256)
      fs.writeFileSync(file, bytes)
      for (const [offset, size] of [[0, 0], [0, 1], [7, 4096], [1000, 256 * 1024 - 1], [5, 256 * 1024], [333, 1024 * 1024]]) {
        const got = yield* Effect.promise(() => readRange({ hash: "", file, offset: offset!, size: size! }))
        expect(Buffer.from(got).equals(Buffer.from(bytes.subarray(offset!, offset! + size!))), `${offset}+${size}`).toBe(true)
      }
      for (const size of [100, 512 * 1024]) {
        const error = yield* Effect.flip(Effect.tryPromise(() => readRange({ hash: "", file, offset: bytes.length - 10, size })))
        expect(String(error.cause)).toContain("is shorter than expected")
      }
    }).pipe(Effect.scoped))
})
