/** scripts/infra/follow.ts: `tail -F` of log files, prefixed by label. */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { followLogs } from "../../scripts/infra/follow.ts"

describe("followLogs", () => {
  it.live("prints complete lines with their label, waits for a missing file, starts over after a truncation or a replacement", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-follow-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const a = path.join(dir, "a.log")
      const b = path.join(dir, "b.log")
      fs.writeFileSync(a, "one\ntw")
      const out: Array<string> = []
      const follower = yield* followLogs([{ label: "node-1", file: a }, { label: "pg", file: b }], {
        intervalMs: 60_000,
        write: (text) => out.push(text)
      })
      yield* follower.flush
      expect(out.join("")).toBe("node-1 | one\n")

      fs.appendFileSync(a, "o\r\nthree\n")
      fs.writeFileSync(b, "ready\n")
      yield* follower.flush
      expect(out.join("")).toBe("node-1 | one\nnode-1 | two\nnode-1 | three\npg     | ready\n")

      out.length = 0
      fs.writeFileSync(a, "again\n")
      fs.rmSync(b)
      yield* follower.flush
      fs.writeFileSync(b, "new file\n")
      yield* follower.flush
      expect(out.join("")).toBe("node-1 | again\npg     | new file\n")
    }).pipe(Effect.scoped))
})
