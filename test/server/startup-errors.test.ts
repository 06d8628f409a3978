/**
 * Start-up mistakes with the real `grove-server` binary: the same data directory twice, and a port
 * something else listens on, each answer one clear line on stderr at once, with exit code 1 (not a
 * stack trace, not after the database has been opened).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"

let server: GroveServer
const dirs: Array<string> = []
const tempDir = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-startup-"))
  dirs.push(dir)
  return dir
}

beforeAll(async () => {
  server = await startServer()
}, 300_000)

afterAll(async () => {
  await server?.stop()
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
})

/** Runs `grove-server serve args...`; answers its exit code, stderr's lines and how long it took. */
const serve = async (args: ReadonlyArray<string>) => {
  const started = Date.now()
  const result = await run(SERVER_BIN, ["serve", ...args], { timeoutMs: 60_000 })
  return { code: result.code, lines: result.stderr.trim().split("\n"), stdout: result.stdout, ms: Date.now() - started }
}

describe("grove-server start-up errors", () => {
  it("the same data directory twice: one line naming the directory and the running server's pid, exit 1", async () => {
    const second = await serve(["--port", "0", "--data-dir", server.dataDir])
    expect(second.code).toBe(1)
    expect(second.lines).toEqual([
      `grove-server: the data directory ${server.dataDir} is in use by another grove-server (pid ${server.process.pid}): stop it, or start with another --data-dir`
    ])
    expect(second.stdout).toBe("")
    // At once: before the database or any module of the server is loaded (0.7 s here; it took 9 s before).
    expect(second.ms).toBeLessThan(10_000)
    // The running server is untouched.
    expect((await fetch(`${server.url}/api/version`)).status).toBe(200)
  }, 60_000)

  it("a port in use: one line naming the address, exit 1, and the data directory is not locked", async () => {
    const port = Number(new URL(server.url).port)
    const dataDir = tempDir()
    const second = await serve(["--port", String(port), "--data-dir", dataDir])
    expect(second.code).toBe(1)
    expect(second.lines).toEqual([
      `grove-server: cannot listen on 127.0.0.1:${port}: the address is in use (another grove-server?): stop it, or start with another --port`
    ])
    expect(second.ms).toBeLessThan(10_000)
    expect(fs.existsSync(path.join(dataDir, "server.lock"))).toBe(false)

    // Anything on the port, not only a Grove server.
    const other = net.createServer()
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve))
    try {
      const otherPort = (other.address() as net.AddressInfo).port
      const third = await serve(["--port", String(otherPort), "--data-dir", tempDir()])
      expect(third.code).toBe(1)
      expect(third.lines).toEqual([
        `grove-server: cannot listen on 127.0.0.1:${otherPort}: the address is in use (another grove-server?): stop it, or start with another --port`
      ])
    } finally {
      await new Promise((resolve) => other.close(resolve))
    }
  }, 60_000)
})
