/**
 * Schemathesis against the real server (embedded mode), through `/api/openapi.json`, with every
 * check, a fixed seed and a bounded number of examples per operation: once with a user's token,
 * once without. Any failure (a 5xx, a response the document does not declare, data the document
 * allows refused or data it forbids accepted, a method not answered 405, a declared token not
 * enforced…) fails the test with schemathesis's report.
 *
 * Schemathesis is pinned and installed into `.venv/schemathesis` by scripts/setup/schemathesis.sh
 * (run by `npm test`'s pretest; run here too when missing).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { type GroveServer, ROOT, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const ST = path.join(ROOT, ".venv/schemathesis/bin/st")
const CONFIG = path.join(ROOT, "test/fuzz/schemathesis.toml")
const SEED = 20261124
/** Per operation and phase (the coverage phase adds its own deterministic cases). */
const MAX_EXAMPLES = 3

let server: GroveServer
let token: string

beforeAll(async () => {
  if (!fs.existsSync(ST)) {
    const setup = spawnSync("bash", [path.join(ROOT, "scripts/setup/schemathesis.sh")], { stdio: "inherit" })
    if (setup.status !== 0) throw new Error("scripts/setup/schemathesis.sh failed")
  }
  server = await startServer()
  token = await server.createUser("fuzzer")
  // Something to find: a public and a private repository, and a branch.
  const a = api(server.url, token)
  expect((await a.post("/repos", { name: "open", is_public: true })).status).toBe(201)
  expect((await a.post("/repos", { name: "closed" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

interface Run {
  readonly code: number
  readonly output: string
}

const schemathesis = (extra: ReadonlyArray<string>) =>
  new Promise<Run>((resolve, reject) => {
    const child = spawn(ST, [
      "--config-file",
      CONFIG,
      "run",
      `${server.url}/api/openapi.json`,
      "--url",
      server.url,
      "--checks",
      "all",
      "--seed",
      String(SEED),
      "--max-examples",
      String(MAX_EXAMPLES),
      // One worker: on Python 3.11, hypothesis's parsing of lambdas in several threads at once can
      // fail inside CPython ("AST constructor recursion depth mismatch"), a runtime error of the tool.
      // The two runs (with and without a token) go side by side instead.
      "--workers",
      "1",
      "--no-shrink",
      "--request-timeout",
      "20",
      ...extra
    ], { cwd: ROOT, env: { ...process.env, NO_COLOR: "1", SCHEMATHESIS_TELEMETRY: "false" }, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (d: Buffer) => (output += d.toString()))
    child.stderr.on("data", (d: Buffer) => (output += d.toString()))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code: code ?? -1, output }))
  })

/** "1276 generated, 3 found 3 unique failures" and the like, from the summary. */
const summary = (output: string): string => {
  const cases = /Test cases:\s*\n\s*(.+)/.exec(output)?.[1] ?? "?"
  return cases.trim()
}

describe("schemathesis, all checks", () => {
  it("finds nothing, with a token and without one", async () => {
    const runs = await Promise.all([
      schemathesis(["--header", `Authorization: Bearer ${token}`]),
      schemathesis([])
    ])
    for (const [label, run] of [["with a token", runs[0]], ["without a token", runs[1]]] as const) {
      const serverErrors = (run.output.match(/\[5\d\d\]/g) ?? []).length
      console.log(`schemathesis ${label}: ${summary(run.output)}; 5xx responses reported: ${serverErrors}`)
      if (run.code !== 0) console.log(run.output)
    }
    for (const run of runs) {
      expect(run.output).toMatch(/Test cases:/)
      expect(run.code, "schemathesis reported failures (see the output above)").toBe(0)
    }
    // 3,283 cases took 611 s beside the rest of the suite on 2 shared cores (262 s alone).
  }, 1_500_000)
})
