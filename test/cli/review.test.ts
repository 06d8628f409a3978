/**
 * Reviewing from the CLI with the real `grove` binary against a real server: `grove branch list`
 * (author, description, CI, whether it merges cleanly), `grove branch show`, `grove diff BRANCH`
 * against the merge base with main (coloured on a terminal only), `grove merge BRANCH` of a branch
 * another member pushed, from a checkout that never had it, and a member's refused merge naming who
 * can merge.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { at, grove, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let ann: GroveOptions
let bo: GroveOptions
let annWork: string

const write = (dir: string, file: string, text: string) => fs.writeFileSync(path.join(dir, file), text)
const branchOf = async (options: GroveOptions) => json(await ok(["status", "--json"], options)).branch as string

beforeAll(async () => {
  server = await startSuiteServer()
  const annKey = await server.createUser("ann")
  ann = userOf(server, "ann", annKey)
  bo = userOf(server, "bo", await server.createUser("bo"))
  expect((await api(server.url, annKey).post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await api(server.url, annKey).post("/orgs/acme/members", { username: "bo" })).status).toBe(201)
  annWork = tempDir("ann")
}, 300_000)

afterAll(stopSuiteServers)

describe("reviewing from the CLI", () => {
  it("branch list, branch show, diff BRANCH (coloured on a terminal only), merge BRANCH from another checkout, and who can merge", async () => {
    await ok(["init", "--owner", "acme", "--name", "app"], at(ann, annWork))
    write(annWork, "README.md", "hello\n")
    await ok(["push"], at(ann, annWork))
    await ok(["desc", "Start"], at(ann, annWork))
    await ok(["merge"], at(ann, annWork))

    // Bo works in his own clone.
    const clones = tempDir("clones")
    await ok(["clone", "acme/app", "app"], at(bo, clones))
    const boApp = path.join(clones, "app")
    write(boApp, "README.md", "hello\nworld\n")
    write(boApp, "new.txt", "from bo\n")
    await ok(["push"], at(bo, boApp))
    await ok(["desc", "Bo's change\n\nA longer body."], at(bo, boApp))
    await ok(["push"], at(bo, boApp))
    const boBranch = await branchOf(at(bo, boApp))

    // Ann, in her checkout, sees what waits for review.
    const listed = json(await ok(["branch", "list", "--json"], at(ann, annWork)))
    const row = listed.branches.find((b: { name: string }) => b.name === boBranch)
    expect(row).toMatchObject({ author: "bo", description: "Bo's change\n\nA longer body.", state: "open", ci: "none", merge: "clean", head: expect.stringMatching(/^[0-9a-f]{64}$/) })
    expect(listed.branches.map((b: { name: string }) => b.name)).not.toContain("main")
    const table = (await ok(["branch", "list"], at(ann, annWork))).stdout
    expect(table).toMatch(/^BRANCH\s+AUTHOR\s+UPDATED\s+CI\s+MERGE\s+HEAD\s+DESCRIPTION$/m)
    expect(table).toMatch(new RegExp(`^${boBranch}\\s+bo\\s+\\S+\\s+none\\s+clean\\s+${row.head.slice(0, 12)}\\s+Bo's change$`, "m"))
    // Outside any checkout, with --repo.
    expect(json(await ok(["branch", "list", "--repo", "acme/app", "--json"], at(ann, tempDir("outside")))).branches.map((b: { name: string }) => b.name)).toContain(boBranch)

    const shown = await ok(["branch", "show", boBranch], at(ann, annWork))
    expect(shown.stdout).toContain(`${boBranch} (open) by bo`)
    expect(shown.stdout).toContain("    A longer body.")
    expect(shown.stdout).toContain("Merge:  clean")
    expect(shown.stdout).toMatch(/Commits \((1|2)\):/)
    expect(shown.stdout).toContain("Files changed (2):\n  M README.md\n  A new.txt")
    expect(json(await ok(["branch", "show", boBranch, "--json"], at(ann, annWork))).preview.files.map((f: { path: string; change_type: string }) => [f.path, f.change_type]))
      .toEqual([["README.md", "modified"], ["new.txt", "added"]])

    // The diff against the merge base: plain into a pipe, coloured on a terminal unless NO_COLOR or --no-color.
    const plain = await ok(["diff", boBranch], at(ann, annWork))
    expect(plain.stdout).toContain("--- a/README.md\n+++ b/README.md\n")
    expect(plain.stdout).toContain("+world")
    expect(plain.stdout).toContain("--- /dev/null\n+++ b/new.txt\n")
    expect(plain.stdout).not.toContain("\x1b[")
    const colored = await ok(["diff", boBranch], { ...at(ann, annWork), terminal: true })
    expect(colored.stdout).toContain("\x1b[32m+world\x1b[0m")
    expect(colored.stdout).toContain("\x1b[36m@@")
    for (const options of [{ ...at(ann, annWork), terminal: true, env: { ...ann.env, NO_COLOR: "1" } }]) {
      expect((await ok(["diff", boBranch], options)).stdout).not.toContain("\x1b[")
    }
    expect((await ok(["diff", boBranch, "--no-color"], { ...at(ann, annWork), terminal: true })).stdout).not.toContain("\x1b[")
    // Without a branch: the working tree against the last commit, as before.
    write(annWork, "README.md", "hello\nfrom ann\n")
    expect((await ok(["diff"], at(ann, annWork))).stdout).toContain("+from ann")
    fs.writeFileSync(path.join(annWork, "README.md"), "hello\n")

    // A member may not merge: the refusal names the role and who has it.
    const refused = await grove(["merge"], at(bo, boApp))
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("merging into main needs the 'admin' role in acme: ask an owner or admin of acme: ann")

    // A branch of main that conflicts: ann lands her own new.txt first.
    await ok(["switch", "-c", "clash"], at(ann, annWork))
    write(annWork, "new.txt", "from ann\n")
    await ok(["push"], at(ann, annWork))
    await ok(["merge"], at(ann, annWork))
    const after = json(await ok(["branch", "list", "--json"], at(ann, annWork))).branches.find((b: { name: string }) => b.name === boBranch)
    expect(after).toMatchObject({ merge: "conflicts", conflict_paths: ["new.txt"] })
    expect(json(await ok(["branch", "list", "--status", "merged", "--json"], at(ann, annWork))).branches.map((b: { name: string }) => b.name)).toContain("clash")

    // Bo's second branch, merged by ann from her checkout, which never had it.
    await ok(["switch", "-c", "docs"], at(bo, boApp))
    write(boApp, "docs.txt", "docs\n")
    await ok(["push"], at(bo, boApp))
    const merged = await ok(["merge", "docs"], at(ann, annWork))
    expect(merged.stdout).toMatch(/^Merged docs into main: [0-9a-f]{12}/)
    expect(json(await ok(["branch", "list", "--status", "merged", "--json"], at(ann, annWork))).branches.map((b: { name: string }) => b.name)).toContain("docs")
  }, 240_000)
})
