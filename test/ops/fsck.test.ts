/**
 * `grove-server fsck` in embedded mode, as an operator runs it: refused while the server holds the
 * data directory; clean after a push and a merge by the real `grove`; exit 1 naming an object file
 * deleted from `DATA_DIR/objects`; exit 2 on bad usage.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { at, ok, removeTempDirs, tempDir, userOf } from "../cli/harness.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"

let server: GroveServer | undefined

afterAll(async () => {
  await server?.stop()
  removeTempDirs()
}, 300_000)

const fsck = (dataDir: string, ...args: Array<string>) => run(SERVER_BIN, ["fsck", "--data-dir", dataDir, ...args], { timeoutMs: 180_000 })

/** Every object file under the data directory's object store. */
const objectFiles = (root: string): Array<string> =>
  fs.readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))

describe("grove-server fsck (embedded)", () => {
  it("refused while the server runs; clean after a push and a merge; names a deleted object and exits 1; 2 on bad usage", async () => {
    const dataDir = tempDir("fsck-data")
    server = await startServer({ dataDir })
    const key = await server.createUser("alice", { admin: true })
    const alice = userOf(server, "alice", key)
    const work = tempDir("fsck-work")
    await ok(["init", "--name", "checked"], at(alice, work))
    fs.writeFileSync(path.join(work, "README.md"), "# Checked\n")
    for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(work, `f${i}.txt`), `file ${i}\n`)
    await ok(["push"], at(alice, work))
    await ok(["desc", "First"], at(alice, work))
    await ok(["merge"], at(alice, work))

    const busy = await fsck(dataDir)
    expect(busy.code).toBe(1)
    expect(busy.stderr).toMatch(/in use by a running grove-server \(pid \d+\): stop it first/)

    await server.stop()
    server = undefined
    const clean = await fsck(dataDir, "--json")
    expect(clean.code, clean.stderr).toBe(0)
    const summary = JSON.parse(clean.stdout.trim()).summary
    expect(summary).toMatchObject({ ok: true, counts: { repositories: 1, blobs: 21, chunks: 21 } })

    const objects = objectFiles(path.join(dataDir, "objects"))
    expect(objects.length).toBeGreaterThan(0)
    fs.rmSync(objects[0]!)
    const broken = await fsck(dataDir)
    expect(broken.code).toBe(1)
    expect(broken.stdout).toContain(`missing    pack ${path.basename(objects[0]!)} (alice)`)
    expect(broken.stdout).toMatch(/problems? \(\d+ missing\)\n$/)

    const usage = await fsck(dataDir, "--concurrency", "0")
    expect(usage.code).toBe(2)
    expect(usage.stderr).toContain("--concurrency takes a whole number from 1 to 256")
  }, 600_000)
})
