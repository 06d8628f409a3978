/**
 * The harness itself: a child that exits before reading its input must not fail the run (an
 * unhandled `write EPIPE` on its stdin once made `npm test` exit 1 after every test had passed), and
 * a suite that ends without stopping its server (a timed-out `beforeAll`) leaves no server running.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { run } from "./GroveServer.ts"
import { waitFor } from "./waitFor.ts"

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

  it("kills the servers a test process started when it exits without stopping them", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-harness-"))
    try {
      const script = path.join(dir, "leave.ts")
      fs.writeFileSync(script, [
        `import { startServer } from ${JSON.stringify(path.join(import.meta.dirname, "GroveServer.ts"))}`,
        "const server = await startServer()",
        "console.log(`pid=${server.process.pid}`)",
        // Exits as a worker whose test failed would: without calling stop().
        "process.exit(1)"
      ].join("\n"))
      const result = await run(script, [], { timeoutMs: 240_000 })
      const pid = Number(/pid=(\d+)/.exec(result.stdout)?.[1])
      expect(pid, result.stdout + result.stderr).toBeGreaterThan(0)
      const alive = () => {
        try {
          process.kill(pid, 0)
          return true
        } catch {
          return false
        }
      }
      await waitFor("the abandoned server to be gone", async () => (alive() ? undefined : true), 30_000)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 300_000)
})
