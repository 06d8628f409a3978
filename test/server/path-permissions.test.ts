/**
 * Path permissions end to end: `.oak/PERMISSIONS` on main, and every read path withholding what a
 * caller may not read — raw (404), the zip and `git clone` (files left out), pull
 * (`restricted_blobs`), `blobs/info` and `chunks/download` (`restricted`), presence checks and
 * tree listings (entries left out). A group member and a named user are granted; org admins read
 * everything; a plain member and an anonymous reader of the public repository are not granted.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { buildCommit, decodeBatch, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const exec = promisify(execFile)

let server: GroveServer
let work: string
const tokens: Record<string, string> = {}
const as = (user: string) => api(server.url, tokens[user])

const PERMISSIONS = [
  "# who reads what",
  "/secret/ @acme/ops",
  "*.pem @mia",
  "/public/ *",
  "/ghosts/ @ghost @acme/nobody",
  "[ @mia",
  ""
].join("\n")

const FILES: Record<string, string> = {
  "README.md": "hello\n",
  "secret/key.txt": "the key\n",
  "certs/server.pem": "-----BEGIN-----\n",
  "public/info.txt": "for everyone\n",
  "src/app.ts": "export {}\n",
  ".oak/PERMISSIONS": PERMISSIONS
}
const RESTRICTED_FOR_NINA = ["certs/server.pem", "secret/key.txt"]
let hashes: Record<string, string>

beforeAll(async () => {
  server = await startServer()
  work = fs.mkdtempSync(path.join(os.tmpdir(), "grove-perms-"))
  for (const user of ["olga", "adam", "mia", "nina", "zed"]) tokens[user] = await server.createUser(user)
  expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "adam", role: "admin" })).status).toBe(201)
  for (const user of ["mia", "nina"]) expect((await as("olga").post("/orgs/acme/members", { username: user })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/groups", { slug: "ops" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/groups/ops/members", { username: "mia" })).status).toBe(200)
  expect((await as("olga").post("/repos", { name: "app", organization_slug: "acme", is_public: true })).status).toBe(201)
  const c = buildCommit({ branch: "setup", files: FILES })
  hashes = Object.fromEntries([...c.snapshot.entries()].map(([p, e]) => [p, e.hash]))
  const pushed = await as("olga").post("/acme/app/push", pushBody({ branch: "setup", commits: [c], description: "Setup" }))
  expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
  expect((await as("olga").post("/acme/app/branches/setup/merge")).status).toBe(200)
}, 300_000)

afterAll(async () => {
  await server?.stop()
  fs.rmSync(work, { recursive: true, force: true })
})

const granted = (user: string | undefined) => (user === undefined || user === "nina" ? Object.keys(FILES).filter((p) => !RESTRICTED_FOR_NINA.includes(p)) : Object.keys(FILES)).sort()

const filesUnder = (dir: string): Array<string> => {
  const out: Array<string> = []
  const walk = (d: string, prefix: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      if (entry.name === ".git") continue
      if (entry.isDirectory()) walk(path.join(d, entry.name), `${prefix}${entry.name}/`)
      else out.push(`${prefix}${entry.name}`)
    }
  }
  walk(dir, "")
  return out.sort()
}

describe("path permissions", () => {
  it("shows the parse of the file on main: entries, principals, warnings with line numbers, enforced", async () => {
    const shown = await as("nina").get("/acme/app/path-permissions")
    expect(shown.status).toBe(200)
    expect(shown.body.enforced).toBe(true)
    expect(shown.body.valid).toBe(false)
    expect(shown.body.entries.map((e: { line: number; pattern: string }) => [e.line, e.pattern])).toEqual([
      [2, "/secret/"],
      [3, "*.pem"],
      [4, "/public/"],
      [5, "/ghosts/"]
    ])
    expect(shown.body.principals).toEqual(["@acme/ops", "@mia", "*", "@ghost", "@acme/nobody"])
    const warnings = shown.body.warnings.map((w: { line: number; code: string }) => `${w.line}:${w.code}`)
    expect(warnings).toEqual(["5:unknown_principal", "5:unknown_principal", "6:bad_glob"])
    expect((await as("zed").get("/acme/app/path-permissions")).status).toBe(200)
    // Without a file: nothing enforced.
    expect((await as("olga").post("/repos", { name: "plain", organization_slug: "acme" })).status).toBe(201)
    expect((await as("nina").get("/acme/plain/path-permissions")).body).toMatchObject({ enforced: false, entries: [], warnings: [] })
    expect((await as("zed").get("/acme/plain/path-permissions")).status).toBe(404)
  })

  it("raw answers 404 for a file the caller may not read", async () => {
    for (const [user, file, status] of [
      ["nina", "secret/key.txt", 404],
      ["nina", "certs/server.pem", 404],
      ["nina", "public/info.txt", 200],
      ["nina", "README.md", 200],
      ["mia", "secret/key.txt", 200],
      ["mia", "certs/server.pem", 200],
      ["adam", "secret/key.txt", 200],
      ["olga", "certs/server.pem", 200],
      [undefined, "secret/key.txt", 404],
      [undefined, "public/info.txt", 200],
      ["zed", "secret/key.txt", 404]
    ] as const) {
      const reply = await api(server.url, user === undefined ? undefined : tokens[user]).get(`/acme/app/raw/main/${file}`)
      expect(reply.status, `${user} ${file}`).toBe(status)
      if (status === 200) expect(reply.body).toBe(FILES[file])
    }
  })

  it("tree listings leave out the files the caller may not read, as a pull does", async () => {
    const listed = await as("nina").get("/acme/app/tree/main/secret")
    expect(listed.status).toBe(200)
    expect(JSON.stringify(listed.body)).not.toContain("key.txt")
    expect(JSON.stringify(listed.body)).not.toContain(hashes["secret/key.txt"])
    expect((await as("mia").get("/acme/app/tree/main/secret")).body.entries.map((e: { name: string }) => e.name)).toEqual(["key.txt"])
  })

  it("the zip leaves the files out", async () => {
    for (const user of ["nina", "mia", "adam", undefined]) {
      const response = await fetch(`${server.url}/acme/app/download`, user === undefined ? {} : { headers: { authorization: `Bearer ${tokens[user]}` } })
      expect(response.status).toBe(200)
      const zipPath = path.join(work, `${user ?? "anonymous"}.zip`)
      fs.writeFileSync(zipPath, new Uint8Array(await response.arrayBuffer()))
      const out = path.join(work, `${user ?? "anonymous"}-zip`)
      await exec("unzip", ["-q", zipPath, "-d", out])
      expect(filesUnder(out), String(user)).toEqual(granted(user))
    }
  })

  it("git clone leaves the files out, and each caller gets their own view", async () => {
    for (const user of ["nina", "mia", "nina", "adam"]) {
      // The repository is public: git would not send a password unless challenged, so send the token up front.
      const dest = path.join(work, `clone-${user}-${Math.random().toString(36).slice(2)}`)
      await exec("git", ["-c", `http.extraHeader=Authorization: Bearer ${tokens[user]}`, "clone", "-q", `${server.url}/acme/app.git`, dest], {
        env: { ...process.env, GIT_TERMINAL_PROMPT: "0" }
      })
      expect(filesUnder(dest), user).toEqual(granted(user))
      if (user === "mia") expect(fs.readFileSync(path.join(dest, "secret/key.txt"), "utf8")).toBe("the key\n")
      await exec("git", ["fsck"], { cwd: dest })
    }
  })

  it("pull lists the withheld blobs in restricted_blobs and leaves them out", async () => {
    const nina = await as("nina").get("/acme/app/pull?branch_name=main")
    expect(nina.status).toBe(200)
    const withheld = RESTRICTED_FOR_NINA.map((p) => hashes[p]!).sort()
    expect(nina.body.restricted_blobs).toEqual(withheld)
    const blobs = nina.body.blobs.map((b: { hash: string }) => b.hash)
    for (const hash of withheld) expect(blobs).not.toContain(hash)
    expect(blobs).toContain(hashes["README.md"])
    const mia = await as("mia").get("/acme/app/pull?branch_name=main")
    expect(mia.body.restricted_blobs).toBeUndefined()
    expect(mia.body.blobs.map((b: { hash: string }) => b.hash)).toContain(hashes["secret/key.txt"])
  })

  it("blobs/info and chunks/download list withheld content in `restricted` and do not serve it", async () => {
    const asked = [hashes["secret/key.txt"]!, hashes["README.md"]!]
    const info = await as("nina").post("/acme/app/blobs/info", { hashes: asked })
    expect(info.status).toBe(200)
    expect(info.body.restricted).toEqual([hashes["secret/key.txt"]])
    expect(info.body.blobs.map((b: { hash: string }) => b.hash)).toEqual([hashes["README.md"]])

    const full = await as("mia").post("/acme/app/blobs/info", { hashes: asked })
    expect(full.body.restricted).toBeUndefined()
    const secretChunks = (full.body.blobs as Array<{ hash: string; chunks: Array<{ hash: string }> }>)
      .find((b) => b.hash === hashes["secret/key.txt"])!.chunks.map((c) => c.hash)
    expect(secretChunks.length).toBeGreaterThan(0)

    const denied = await as("nina").post("/acme/app/chunks/download", { hashes: secretChunks })
    expect(denied.status).toBe(200)
    expect(denied.body.chunks).toEqual([])
    expect(denied.body.restricted).toEqual(secretChunks)
    const served = await as("mia").post("/acme/app/chunks/download", { hashes: secretChunks })
    expect(served.body.chunks.map((c: { hash: string }) => c.hash)).toEqual(secretChunks)
    expect(served.body.restricted).toBeUndefined()

    // The binary batch download leaves them out too.
    const fetchAs = (user: string, asked: ReadonlyArray<string>) =>
      fetch(`${server.url}/api/acme/app/chunks/fetch`, {
        method: "POST",
        headers: { authorization: `Bearer ${tokens[user]}`, "content-type": "application/json" },
        body: JSON.stringify({ hashes: asked })
      })
    const fetched = await fetchAs("nina", secretChunks)
    expect(fetched.status).toBe(200)
    expect((await fetched.arrayBuffer()).byteLength).toBe(0)
    // It is located and checked a slice at a time (256 hashes, then 2,000): across the slices' edges a withheld chunk is
    // left out wherever it is asked, and the rest come in request order. Hashes nobody has fill the slices.
    const known: Record<number, string> = {
      0: hashes["README.md"]!, // a small file: one chunk with the blob's hash
      255: secretChunks[0]!,
      256: hashes["src/app.ts"]!,
      1_000: hashes["public/info.txt"]!,
      2_255: hashes[".oak/PERMISSIONS"]!,
      2_256: hashes["certs/server.pem"]!
    }
    const many = Array.from({ length: 2_300 }, (_, i) => known[i] ?? createHash("sha256").update(`nobody has ${i}`).digest("hex"))
    const sliced = await fetchAs("nina", many)
    expect(sliced.status).toBe(200)
    const frames = await decodeBatch(new Uint8Array(await sliced.arrayBuffer()))
    expect(frames.map((f) => f.hash)).toEqual([hashes["README.md"], hashes["src/app.ts"], hashes["public/info.txt"], hashes[".oak/PERMISSIONS"]])
    expect(secretChunks).toEqual([hashes["secret/key.txt"]])
    expect(Buffer.from(frames[0]!.data).toString()).toBe(FILES["README.md"])
    const toMia = await decodeBatch(new Uint8Array(await (await fetchAs("mia", many)).arrayBuffer()))
    expect(toMia.map((f) => f.hash)).toEqual(Object.values(known))
  })

  it("presence checks do not tell of withheld content", async () => {
    const check = await as("nina").post("/acme/app/blobs/check", { hashes: [hashes["secret/key.txt"], hashes["README.md"]] })
    expect(check.status).toBe(200)
    expect(check.body.missing).toEqual([hashes["secret/key.txt"]])
    expect((await as("mia").post("/acme/app/blobs/check", { hashes: [hashes["secret/key.txt"]] })).body.missing).toEqual([])
  })

  it("follows group changes at once: leaving the group withholds, joining grants", async () => {
    expect((await as("mia").get("/acme/app/raw/main/secret/key.txt")).status).toBe(200)
    expect((await as("olga").delete("/orgs/acme/groups/ops/members/mia")).status).toBe(204)
    expect((await as("mia").get("/acme/app/raw/main/secret/key.txt")).status).toBe(404)
    expect((await as("olga").post("/orgs/acme/groups/ops/members", { username: "nina" })).status).toBe(200)
    expect((await as("nina").get("/acme/app/raw/main/secret/key.txt")).status).toBe(200)
  })
})

describe("path-permission proposals", () => {
  it("an admin proposes a file: a branch off main carrying exactly that change, listed with its description", async () => {
    const proposed = "/secret/ @acme/ops @nina\n*.pem @mia\n"
    const created = await as("adam").post("/acme/app/path-permissions/propose", { content: proposed, description: "Let nina read secrets" })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const { branch, commit } = created.body as { branch: string; commit: string }
    const listed = (await as("nina").get("/acme/app/branches")).body as { branches: Array<{ name: string; description: string | null; head: string }> }
    const entry = listed.branches.find((b) => b.name === branch)
    expect(entry).toMatchObject({ description: "Let nina read secrets", head: commit })
    // Only the file changed: the branch's tree is main's with the new file.
    expect((await as("adam").get(`/acme/app/raw/${branch}/.oak/PERMISSIONS`)).body).toBe(proposed)
    expect((await as("adam").get(`/acme/app/raw/${branch}/README.md`)).body).toBe(FILES["README.md"])
    const pulled = await as("adam").get(`/acme/app/pull?branch_name=${branch}`)
    expect(pulled.body.commits.at(-1)).toMatchObject({ hash: commit, message: "Let nina read secrets" })
    expect(pulled.body.commits.at(-1).files).toEqual([expect.objectContaining({ path: ".oak/PERMISSIONS", change_type: "modified" })])
    // Main is unchanged until the branch is merged; then the new file is enforced.
    expect((await as("nina").get("/acme/app/raw/main/certs/server.pem")).status).toBe(404)
    expect((await as("olga").post(`/acme/app/branches/${branch}/merge`)).status).toBe(200)
    const shown = await as("nina").get("/acme/app/path-permissions")
    expect(shown.body.entries.map((e: { pattern: string }) => e.pattern)).toEqual(["/secret/", "*.pem"])
    expect((await as("zed").get("/acme/app/raw/main/secret/key.txt")).status).toBe(404)
    expect((await as("nina").get("/acme/app/raw/main/public/info.txt")).status).toBe(200)
  })

  it("a member, a read key or a non-member may not propose (403, no branch); bodies other than content or delete are 400", async () => {
    const before = ((await as("olga").get("/acme/app/branches")).body as { branches: Array<unknown> }).branches.length
    expect((await as("mia").post("/acme/app/path-permissions/propose", { content: "* @mia\n" })).status).toBe(403)
    expect((await as("zed").post("/acme/app/path-permissions/propose", { content: "* @zed\n" })).status).toBe(403)
    const readKey = (await as("olga").post("/api-keys", { name: "ro", scope: "read" })).body.key as string
    const byReadKey = await api(server.url, readKey).post("/acme/app/path-permissions/propose", { content: "* @olga\n" })
    expect(byReadKey.status).toBe(403)
    expect(byReadKey.body).toMatchObject({ code: "missing_scope", scope: "admin" })
    for (const body of [{}, { delete: false }, { content: "x", delete: true }, { content: 5 }, { description: "only" }, { content: "x", extra: 1 }]) {
      expect((await as("olga").post("/acme/app/path-permissions/propose", body)).status, JSON.stringify(body)).toBe(400)
    }
    expect(((await as("olga").get("/acme/app/branches")).body as { branches: Array<unknown> }).branches.length).toBe(before)
  })

  it("proposes a deletion; deleting a file main does not have is 409", async () => {
    const removed = await as("olga").post("/acme/app/path-permissions/propose", { delete: true })
    expect(removed.status, JSON.stringify(removed.body)).toBe(201)
    expect((await as("olga").get(`/acme/app/raw/${removed.body.branch}/.oak/PERMISSIONS`)).status).toBe(404)
    expect((await as("olga").post(`/acme/app/branches/${removed.body.branch}/merge`)).status).toBe(200)
    expect((await as("zed").get("/acme/app/path-permissions")).body).toMatchObject({ enforced: false })
    expect((await as("zed").get("/acme/app/raw/main/secret/key.txt")).status).toBe(200)
    const again = await as("olga").post("/acme/app/path-permissions/propose", { delete: true })
    expect([again.status, again.body.code]).toEqual([409, "no_permissions_file"])
    // On an empty repository, the proposal is the branch's only file.
    expect((await as("olga").post("/repos", { name: "empty", organization_slug: "acme" })).status).toBe(201)
    const first = await as("olga").post("/acme/empty/path-permissions/propose", { content: "* @olga\n" })
    expect(first.status, JSON.stringify(first.body)).toBe(201)
    expect((await as("olga").get(`/acme/empty/raw/${first.body.branch}/.oak/PERMISSIONS`)).body).toBe("* @olga\n")
  })
})
