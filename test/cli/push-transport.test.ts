/**
 * The push path's requests go over node:http (packages/cli/src/sync/HttpTransport.ts): a one-file push of the
 * bundled client never loads undici (fetch's implementation, ~70 ms of the push's CPU), makes two requests (its one
 * small blob goes to chunks/batch without chunks/check: sync/Upload.ts), and still lands: a fresh
 * clone has the edit. The clone's JSON answers are large enough that the server sends them zstd-compressed, which
 * the typed client now decodes itself (fetch did before).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type GroveServer, ROOT } from "../support/GroveServer.ts"
import { waitFor } from "../support/waitFor.ts"
import { at, type GroveOptions, grove, json, listing, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
}, 300_000)

afterAll(stopSuiteServers)

/** Prints, at exit, whether undici and node:http were loaded (Node's own list of the modules it loaded). */
const REPORT_MODULES = `data:text/javascript,${encodeURIComponent(`process.on("exit", () => process.stderr.write("modules undici=" + process.moduleLoadList.some((m) => m.includes("undici")) + " http=" + process.moduleLoadList.includes("NativeModule http") + "\\n"))`)}`

describe("the push path over node:http", () => {
  it("a one-file push loads no undici (bundle), makes two requests, lands, and a clone of 400 files reads the server's zstd answers", async () => {
    const work = tempDir("push")
    await ok(["init", "--name", "tp"], at(alice, work))
    // Enough paths that the clone's JSON answers pass the server's compression threshold (8 KiB).
    for (let i = 0; i < 400; i++) {
      fs.mkdirSync(path.join(work, `d${i % 20}`), { recursive: true })
      fs.writeFileSync(path.join(work, `d${i % 20}`, `file-${i}.txt`), `file ${i}\n`)
    }
    await ok(["push"], at(alice, work))
    fs.appendFileSync(path.join(work, "d3/file-3.txt"), "edited\n")
    await ok(["commit"], at(alice, work))

    const bundled = fs.existsSync(path.join(ROOT, "packages/cli/dist/grove.mjs"))
    const logFrom = server.output().length
    const pushed = await grove(["push", "--json"], {
      ...at(alice, work),
      env: { ...alice.env, NODE_OPTIONS: `--import ${REPORT_MODULES}`, ...(bundled ? { GROVE_BUNDLE: "1" } : {}) }
    })
    expect({ code: pushed.code, stderr: pushed.stderr.replace(/^modules .*\n/m, "") }).toEqual({ code: 0, stderr: "" })
    expect(json(pushed)).toMatchObject({ pushed_commits: 1, uploaded_chunks: 1 })
    const modules = /^modules undici=(\w+) http=(\w+)$/m.exec(pushed.stderr)
    expect(modules?.[2]).toBe("true") // the hook saw the run, and the requests went over node:http
    // From the sources effect's typed client still touches the global FormData (which loads undici); the bundle
    // replaces it (packages/cli/scripts/form-data-shim.js).
    if (bundled) expect(modules?.[1]).toBe("false")

    // Two requests: the one small blob goes to chunks/batch without a chunks/check first, then the push.
    const routes = await waitFor("the push in the access log", async () => {
      const seen = [...server.output().slice(logFrom).matchAll(/"route":"\/api\/:owner\/:name\/([a-z/]+)"/g)].map((m) => m[1])
      return seen.includes("push") ? seen : undefined
    })
    expect(routes).toEqual(["chunks/batch", "push"])

    const parent = tempDir("clone")
    await ok(["clone", "alice/tp", "copy", "--branch", json(pushed).branch], at(alice, parent))
    const copy = listing(path.join(parent, "copy"))
    expect(Object.keys(copy).length).toBe(400)
    expect(copy).toEqual(listing(work))
    expect(fs.readFileSync(path.join(parent, "copy/d3/file-3.txt"), "utf8")).toBe("file 3\nedited\n")
  }, 180_000)
})
