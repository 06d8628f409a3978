/**
 * Getting `grove` onto the PATH as the README says (`npm install -g ./packages/cli`, here into a
 * temporary prefix) and running it from any folder; and what an older Node prints.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { CLI_BIN, ROOT, SERVER_BIN } from "../support/GroveServer.ts"
import { removeTempDirs, tempDir } from "./harness.ts"

afterAll(() => removeTempDirs())

const NODE24_DIR = path.dirname(process.execPath)
const OLD_NODE = "/usr/bin/node"
const oldNodeVersion = fs.existsSync(OLD_NODE) ? spawnSync(OLD_NODE, ["--version"], { encoding: "utf8" }).stdout.trim() : ""
const oldNodeMajor = Number(/^v(\d+)\./.exec(oldNodeVersion)?.[1] ?? "0")

const runIn = (cwd: string, command: string, args: ReadonlyArray<string>, PATH: string) =>
  spawnSync(command, args, { cwd, encoding: "utf8", env: { HOME: tempDir("home"), PATH }, timeout: 60_000 })

describe("installing grove", () => {
  it("npm install -g ./packages/cli puts grove on the PATH; it runs from any folder", () => {
    const prefix = tempDir("prefix")
    const install = runIn(ROOT, "npm", ["install", "-g", "--prefix", prefix, "./packages/cli"], `${NODE24_DIR}:/usr/bin:/bin`)
    expect(install.status, install.stderr).toBe(0)
    const bin = path.join(prefix, "bin")
    expect(fs.existsSync(path.join(bin, "grove"))).toBe(true)

    const elsewhere = tempDir("anywhere")
    const version = runIn(elsewhere, "grove", ["--version"], `${bin}:${NODE24_DIR}:/usr/bin:/bin`)
    expect(version.status, version.stderr).toBe(0)
    expect(version.stdout).toMatch(/^grove v\d+\.\d+\.\d+/)
    const help = runIn(elsewhere, "grove", ["--help"], `${bin}:${NODE24_DIR}:/usr/bin:/bin`)
    expect(help.status, help.stderr).toBe(0)
    expect(help.stdout).toContain("push")
  })

  it.skipIf(oldNodeMajor === 0 || oldNodeMajor >= 24)(`started by an older Node (${OLD_NODE}, ${oldNodeVersion}), it says which Node it needs`, () => {
    const direct = runIn(tempDir("anywhere"), OLD_NODE, [CLI_BIN, "--version"], "/usr/bin:/bin")
    expect(direct.status).toBe(1)
    expect(direct.stderr).toContain(`grove needs Node 24.6 or newer; this is ${oldNodeMajor}.x`)
    expect(direct.stderr).not.toContain("SyntaxError")
    expect(direct.stdout).toBe("")
    // Through the shebang too: `node` on the PATH is the old one.
    const viaPath = runIn(tempDir("anywhere"), CLI_BIN, ["push"], "/usr/bin:/bin")
    expect(viaPath.status).toBe(1)
    expect(viaPath.stderr).toContain(`grove needs Node 24.6 or newer; this is ${oldNodeMajor}.x`)
    // The server says so too, before it opens anything (it failed opening the embedded database).
    const data = tempDir("old-node-data")
    const server = runIn(tempDir("anywhere"), OLD_NODE, [SERVER_BIN, "serve", "--port", "0", "--data-dir", data], "/usr/bin:/bin")
    expect(server.status).toBe(1)
    expect(server.stderr).toContain(`grove-server needs Node 24.6 or newer; this is ${oldNodeMajor}.x`)
    expect(fs.readdirSync(data)).toEqual([])
  })
})
