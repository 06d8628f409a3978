/**
 * The harness itself: a child that exits before reading its input must not fail the run (an
 * unhandled `write EPIPE` on its stdin once made `npm test` exit 1 after every test had passed).
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { run } from "./GroveServer.ts"

describe("test harness", () => {
  it("survives a child that exits without reading its input", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-harness-"))
    try {
      const quick = path.join(dir, "quick.js")
      fs.writeFileSync(quick, "process.exit(3)\n")
      // Far more than a pipe buffer holds, so the write is still going when the child is gone.
      const input = "x".repeat(8 * 1024 * 1024)
      for (let i = 0; i < 5; i++) expect((await run(quick, [], { input })).code).toBe(3)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
