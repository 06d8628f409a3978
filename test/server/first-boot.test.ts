/**
 * An embedded server's first boot (a fresh data directory): initdb runs in a child process
 * (packages/storage/src/PgliteInit.ts), so the server holds only the WebAssembly memory of the
 * database it opened, as after a restart. Before, initdb's instance (~165 MiB of WebAssembly memory)
 * stayed resident until a full collection: 434-474 MiB RSS one second after a first boot, ~220 once
 * collected, 550-600 in the last session's table.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { residentByKind } from "../../scripts/bench/memory.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-first-boot-"))
const servers: Array<GroveServer> = []
afterAll(async () => {
  for (const server of servers) await server.stop()
  fs.rmSync(root, { recursive: true, force: true })
})

describe("an embedded server's first boot", () => {
  it("holds no initdb memory, leaves only its database, and restarts on it", async () => {
    const dataDir = path.join(root, "data")
    const first = await startServer({ dataDir })
    servers.push(first)
    // At once, before any idle collection could give a dead instance's memory back (ops/IdleGc.ts looks every 10 s).
    const wasmMiB = residentByKind(first.process.pid!).wasm / 1024
    // The database it opened: ~30-35 MiB (shared_buffers 16 MB and catalogs); with initdb's instance ~200.
    expect(wasmMiB, "PGlite's WebAssembly memory resident after a first boot (MiB)").toBeLessThan(100)
    const key = await first.createUser("alice")
    await first.stop()
    // Only the database: no temporary directory of the init left beside it.
    expect(fs.readdirSync(dataDir).filter((name) => name.startsWith("db")).sort()).toEqual(["db"])
    expect(fs.existsSync(path.join(dataDir, "db", "PG_VERSION"))).toBe(true)

    const again = await startServer({ dataDir })
    servers.push(again)
    const whoami = await fetch(`${again.url}/api/whoami`, { headers: { authorization: `Bearer ${key}` } })
    expect(whoami.status).toBe(200)
    expect(((await whoami.json()) as { username: string }).username).toBe("alice")
  }, 600_000)
})
