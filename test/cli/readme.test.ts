/**
 * The top-level README's content walkthrough, command for command, as a new user runs it: `grove`
 * on the PATH, init against a running server, the first push (a private repository), making it
 * public, merge, revert by a short hash, clone, and the zip (curl -f) and git clone of main. Also
 * `grove repo visibility` and bad input exiting 2.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { at, grove, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  // GROVE_REMOTE stands for the default server address (http://127.0.0.1:8080) of the README.
  alice = userOf(server, "alice", await server.createUser("alice"))
}, 300_000)

afterAll(stopSuiteServers)

const sh = (cwd: string, command: string, args: ReadonlyArray<string>) =>
  spawnSync(command, args, { cwd, encoding: "utf8", timeout: 60_000, env: { PATH: "/usr/bin:/bin", HOME: cwd, GIT_TERMINAL_PROMPT: "0" } })

describe("the README, as a new user runs it", () => {
  it("init, commit, push (private), repo visibility public, desc, merge, revert <short hash>, clone, curl -f zip, git clone", async () => {
    const parent = tempDir("projects")
    const work = path.join(parent, "my-project")
    fs.mkdirSync(work)
    const init = await ok(["init", "--remote", server.url, "--json"], at(alice, work))
    expect(json(init)).toMatchObject({ repository: "alice/my-project", repository_exists: false })
    const initHuman = await ok(["init", "--remote", server.url], at(alice, tempDir("other")))
    expect(initHuman.stdout).toContain("does not exist yet: the first grove push creates it, private")

    fs.writeFileSync(path.join(work, "README.md"), "# My project\n")
    await ok(["commit"], at(alice, work))
    const push = await ok(["push", "--json"], at(alice, work))
    expect(json(push)).toMatchObject({ created_repository: true })
    expect(json(await ok(["repo", "show", "alice/my-project", "--json", "--remote", server.url], at(alice, work)))).toMatchObject({ visibility: "private" })

    fs.mkdirSync(path.join(parent, "elsewhere", "my-project"), { recursive: true })
    const existing = await ok(["init", "--remote", server.url, "--json"], at(alice, path.join(parent, "elsewhere", "my-project")))
    expect(json(existing)).toMatchObject({ repository: "alice/my-project", repository_exists: true })

    const visibility = await ok(["repo", "visibility", "public"], at(alice, work))
    expect(visibility.stdout.trim()).toBe("alice/my-project is now public.")
    await ok(["desc", "Add the parser"], at(alice, work))
    const merged = await ok(["merge", "--json"], at(alice, work))
    const squash: string = json(merged).commit_hash

    // The zip and git clone of main, anonymous, exactly as the README writes them.
    const downloads = tempDir("downloads")
    const zip = sh(downloads, "curl", ["-f", "-o", "main.zip", `${server.url}/alice/my-project/download`])
    expect(zip.status, zip.stderr).toBe(0)
    const zipped = fs.readFileSync(path.join(downloads, "main.zip"))
    expect(zipped.subarray(0, 2).toString()).toBe("PK")
    expect(zipped.toString("latin1")).toContain("README.md")
    const clone = sh(downloads, "git", ["clone", `${server.url}/alice/my-project.git`])
    expect(clone.status, clone.stderr).toBe(0)
    expect(fs.readFileSync(path.join(downloads, "my-project", "README.md"), "utf8")).toBe("# My project\n")

    const reverted = await grove(["revert", squash.slice(0, 7)], at(alice, work))
    expect(reverted.code, reverted.stderr).toBe(0)
    expect(reverted.stdout).toMatch(new RegExp(`^Reverted ${squash.slice(0, 12)} on main: [0-9a-f]{12} [^"]`))
    expect(reverted.stdout).not.toContain("\\\"")

    const clones = tempDir("clones")
    await ok(["clone", "alice/my-project", "copy"], at(alice, clones))
    expect(fs.existsSync(path.join(clones, "copy", ".grove"))).toBe(true)

    // Private again: curl -f fails and saves no error as main.zip.
    await ok(["repo", "visibility", "private", "alice/my-project", "--remote", server.url], at(alice, tempDir("outside")))
    const denied = tempDir("denied")
    const refused = sh(denied, "curl", ["-f", "-o", "main.zip", `${server.url}/alice/my-project/download`])
    expect(refused.status).toBe(22)
    expect(fs.existsSync(path.join(denied, "main.zip"))).toBe(false)
    const withKey = sh(denied, "curl", ["-f", "-H", `Authorization: Bearer ${alice.env!["SERVICE_API_KEY"]}`, "-o", "main.zip", `${server.url}/alice/my-project/download`])
    expect(withKey.status, withKey.stderr).toBe(0)
    expect(fs.readFileSync(path.join(denied, "main.zip")).subarray(0, 2).toString()).toBe("PK")
  }, 120_000)

  it("bad input exits 2", async () => {
    const work = tempDir("bad")
    for (const args of [
      ["init", "--remote", server.url, "--owner", "Bad_Owner"],
      ["repo", "visibility", "secret"],
      ["repo", "visibility", "public", "not-a-repo"],
      ["revert", "abc"],
      ["revert", "not hex at all"],
      ["clone", "alice/my-project", "x", "--branch", ""]
    ]) {
      const run = await grove(args, at(alice, work))
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(2)
    }
    expect(fs.existsSync(path.join(work, ".grove"))).toBe(false)
    await ok(["init", "--remote", server.url], at(alice, work))
    const unknown = await grove(["revert", "1234567"], at(alice, work))
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain("no commit in this checkout starts with 1234567")
    for (const args of [
      ["switch", "-c", "HEAD"],
      ["switch", "-c", "refs/heads/x"],
      ["switch", "-c", "trailing "],
      ["switch", ""],
      ["merge", ""],
      ["log", "--limit", "0"],
      ["log", "--limit", "-1"]
    ]) {
      const run = await grove(args, at(alice, work))
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(2)
    }
    // Nothing was created by the refused switches.
    expect(json(await ok(["status", "--json"], at(alice, work))).branch).toMatch(/^alice-[0-9a-f]{6}$/)
  }, 60_000)
})
