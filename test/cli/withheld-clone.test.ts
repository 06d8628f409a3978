/**
 * `grove clone` and `grove pull` by a member without access to some paths (issue 22, item 2; issue 20,
 * item 2). `secret/** @alice` withholds secret/ of acme/app from bob: his clone succeeds without it and
 * says how many paths were withheld; his status shows no deletion; his commit and push keep secret/ as it
 * is on the server; his pull works too. A clone that fails removes the folder it created (and its key).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { buildCommit, pushBody } from "../support/content.ts"
import type { GroveServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { at, grove, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let bob: GroveOptions
const tokens: Record<string, string> = {}
const as = (user: string) => api(server.url, tokens[user])

const FILES = {
  "README.md": "# app\n",
  "src/app.ts": "export const app = 1\n",
  "secret/keys.txt": "DEPLOY_KEY=hunter2\n",
  "secret/more/ca.pem": "-----BEGIN-----\n",
  ".oak/PERMISSIONS": "secret/** @alice\n"
}

beforeAll(async () => {
  server = await startSuiteServer()
  for (const user of ["alice", "bob"]) tokens[user] = await server.createUser(user)
  bob = userOf(server, "bob", tokens.bob!)
  expect((await as("alice").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as("alice").post("/orgs/acme/members", { username: "bob" })).status).toBe(201)
  expect((await as("alice").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
  const c = buildCommit({ branch: "setup", files: FILES })
  expect((await as("alice").post("/acme/app/push", pushBody({ branch: "setup", commits: [c] }))).body.success).toBe(true)
  expect((await as("alice").post("/acme/app/branches/setup/merge")).status).toBe(200)
}, 300_000)

afterAll(stopSuiteServers)

const checkoutKeys = async () =>
  ((await as("bob").get("/api-keys")).body.api_keys as Array<{ name: string }>).filter((k) => k.name.startsWith("grove checkout")).length

describe("a member without access to some paths", () => {
  it("clones without the withheld files, saying how many; status shows no deletion; commit and push keep them on the server", async () => {
    const parent = tempDir("clones")
    const cloned = await grove(["clone", "acme/app"], at(bob, parent))
    expect(cloned.code, cloned.stderr).toBe(0)
    expect(cloned.stdout).toContain("Left out 2 path(s) withheld by path permissions")
    const root = path.join(parent, "app")
    expect(fs.existsSync(path.join(root, "secret"))).toBe(false)
    expect(fs.readFileSync(path.join(root, "README.md"), "utf8")).toBe(FILES["README.md"])
    expect(fs.readFileSync(path.join(root, "src/app.ts"), "utf8")).toBe(FILES["src/app.ts"])

    expect(json(await ok(["status", "--json"], at(bob, root)))).toMatchObject({ changes: [] })

    fs.writeFileSync(path.join(root, "README.md"), "# app, by bob\n")
    const committed = json(await ok(["commit", "--json"], at(bob, root)))
    expect(committed.changes).toEqual([{ path: "README.md", change_type: "modified" }])
    const pushed = json(await ok(["push", "--json"], at(bob, root)))
    expect(pushed.pushed_commits).toBe(1)
    // On the server, bob's branch still has secret/ as main has it.
    const branch = pushed.branch as string
    const secret = await as("alice").get(`/acme/app/raw/${branch}/secret/keys.txt`)
    expect([secret.status, secret.body]).toEqual([200, FILES["secret/keys.txt"]])
    expect((await as("alice").get(`/acme/app/raw/${branch}/README.md`)).body).toBe("# app, by bob\n")

    // alice changes main (secret/ included); bob's pull brings the rest and leaves secret/ out.
    const head = (await as("alice").get("/acme/app/branches/main")).body.head as string
    const next = buildCommit({
      branch: "more",
      files: { ...FILES, "secret/keys.txt": "DEPLOY_KEY=rotated\n", "docs/guide.md": "read me\n" },
      parentHash: head,
      parentSnapshot: buildCommit({ branch: "x", files: FILES }).snapshot
    })
    expect((await as("alice").post("/acme/app/push", pushBody({ branch: "more", commits: [next] }))).body.success).toBe(true)
    expect((await as("alice").post("/acme/app/branches/more/merge")).status).toBe(200)
    const pulled = await grove(["pull"], at(bob, root))
    expect(pulled.code, pulled.stderr).toBe(0)
    expect(pulled.stdout).toContain("Left out 2 path(s) withheld by path permissions")
    expect(fs.readFileSync(path.join(root, "docs/guide.md"), "utf8")).toBe("read me\n")
    expect(fs.existsSync(path.join(root, "secret"))).toBe(false)
    expect(json(await ok(["status", "--json"], at(bob, root)))).toMatchObject({ changes: [] })
  })

  it("a fresh clone of main after the change still works; --json counts the withheld paths", async () => {
    const parent = tempDir("clones2")
    const cloned = json(await ok(["clone", "acme/app", "again", "--json"], at(bob, parent)))
    expect(cloned).toMatchObject({ repository: "acme/app", withheld_paths: 2 })
    expect(fs.existsSync(path.join(parent, "again/secret"))).toBe(false)
    expect(fs.existsSync(path.join(parent, "again/docs/guide.md"))).toBe(true)
  })

  it("a failed clone removes the folder it created and its key, so a retry works", async () => {
    const parent = tempDir("failed")
    const keysBefore = await checkoutKeys()
    const failed = await grove(["clone", "acme/app", "dest", "--branch", "no-such-branch"], at(bob, parent))
    expect(failed.code).not.toBe(0)
    expect(failed.stderr).toContain("no branch")
    expect(fs.existsSync(path.join(parent, "dest"))).toBe(false)
    expect(await checkoutKeys()).toBe(keysBefore)
    // An empty folder given as the destination is kept, empty.
    fs.mkdirSync(path.join(parent, "empty"))
    expect((await grove(["clone", "acme/app", "empty", "--branch", "no-such-branch"], at(bob, parent))).code).not.toBe(0)
    expect(fs.readdirSync(path.join(parent, "empty"))).toEqual([])
    // The retry into the same place succeeds.
    const retried = await grove(["clone", "acme/app", "dest"], at(bob, parent))
    expect(retried.code, retried.stderr).toBe(0)
    expect(fs.existsSync(path.join(parent, "dest/README.md"))).toBe(true)
  })
})
