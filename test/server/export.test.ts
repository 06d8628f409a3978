/**
 * Main outside the API, with the stock tools: squash merges build main, then `unzip` checks the
 * download and `git clone` / `git log` check the git snapshot (files, modes, history), including
 * the credential prompt of a private repository.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { batchBody, buildCommit, chunkRefs, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const exec = promisify(execFile)

let server: GroveServer
let token: string
let otherToken: string
let work: string

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("uma")
  otherToken = await server.createUser("victor")
  work = fs.mkdtempSync(path.join(os.tmpdir(), "grove-export-"))
}, 300_000)

afterAll(async () => {
  await server?.stop()
  if (work !== undefined) fs.rmSync(work, { recursive: true, force: true })
})

const big = (() => {
  const bytes = new Uint8Array(11 * 1024 * 1024)
  let x = 12345
  for (let i = 0; i < bytes.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    bytes[i] = x >>> 24
  }
  return bytes
})()

const filesV1 = {
  "README.md": "# Export\n",
  "src/main.ts": "console.log('hi')\n",
  "src/deep/nested/file.txt": "deep\n",
  "bin/tool": { content: "#!/bin/sh\necho tool\n", mode: "executable" as const },
  "link": { content: "README.md", mode: "symlink" as const },
  "empty": "",
  "data/big.bin": big,
  "ünïcode名.txt": "unicode\n"
}

/** Pushes `files` as branch `branch` (parented on main's head) and merges it. */
const landOnMain = async (repo: string, branch: string, files: Record<string, unknown>, description: string) => {
  const a = api(server.url, token)
  const mainHead = (await a.get(`/uma/${repo}`)).body.head as string | null
  const parent = mainHead === null
    ? null
    : (await a.post(`/uma/${repo}/commits/info`, { hashes: [mainHead] })).body.commits[0]
  const pull = mainHead === null ? undefined : await a.get(`/uma/${repo}/pull`)
  const parentSnapshot = new Map<string, { hash: string; mode: "regular" | "executable" | "symlink" }>()
  if (pull !== undefined) {
    // Rebuild main's snapshot from the trees of the pull.
    const trees = new Map<string, Array<{ name: string; kind: string; hash: string; mode: string }>>(
      pull.body.trees.map((t: { hash: string; entries: Array<{ name: string; kind: string; hash: string; mode: string }> }) => [t.hash, t.entries])
    )
    const walk = (hash: string, prefix: string) => {
      for (const e of trees.get(hash) ?? []) {
        const p = prefix === "" ? e.name : `${prefix}/${e.name}`
        if (e.kind === "tree") walk(e.hash, p)
        else parentSnapshot.set(p, { hash: e.hash, mode: e.mode as "regular" })
      }
    }
    walk(parent.manifest_hash, "")
  }
  const c = buildCommit({ branch, files: files as never, parentHash: mainHead, parentSnapshot })
  // Large files go up as chunks first, like a client does.
  const blobs = []
  for (const [hash, bytes] of c.contents) {
    if (bytes.length >= 10 * 1024 * 1024) {
      const refs = chunkRefs(bytes)
      const up = await fetch(`${server.url}/api/uma/${repo}/chunks/batch`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: batchBody(refs)
      })
      expect(up.status).toBe(200)
      blobs.push({ hash, content: [], size: bytes.length, chunks: refs.map(({ hash: h, offset, size }) => ({ hash: h, offset, size })) })
    } else if (!parentSnapshot.has(hash)) blobs.push({ hash, content: Array.from(bytes), size: bytes.length })
  }
  const pushed = await a.post(`/uma/${repo}/push`, pushBody({ branch, commits: [c], blobs, description }))
  expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })
  const merged = await a.post(`/uma/${repo}/branches/${encodeURIComponent(branch)}/merge`)
  expect(merged.status, JSON.stringify(merged.body)).toBe(200)
  expect(merged.body).toMatchObject({ merge_parent_hash: c.commit.hash, message: description })
  return merged.body as { commit_hash: string }
}

const sha = (bytes: Uint8Array | Buffer) => Blake3.hash(new Uint8Array(bytes))

describe("zip download and git snapshot of main", () => {
  it("downloads main as a zip that unzip accepts, with the same bytes and modes", async () => {
    await api(server.url, token).post("/repos", { name: "exp", is_public: true })
    const first = await landOnMain("exp", "feature/one", filesV1, "Add the first files")
    expect((await api(server.url, token).get("/uma/exp")).body.head).toBe(first.commit_hash)

    const response = await fetch(`${server.url}/uma/exp/download`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/zip")
    const zipPath = path.join(work, "exp.zip")
    fs.writeFileSync(zipPath, Buffer.from(await response.arrayBuffer()))
    await exec("unzip", ["-tq", zipPath])
    const out = path.join(work, "unzipped")
    await exec("unzip", ["-q", zipPath, "-d", out])
    expect(fs.readFileSync(path.join(out, "README.md"), "utf8")).toBe("# Export\n")
    expect(sha(fs.readFileSync(path.join(out, "data/big.bin")))).toBe(sha(big))
    expect(fs.readFileSync(path.join(out, "ünïcode名.txt"), "utf8")).toBe("unicode\n")
    expect(fs.statSync(path.join(out, "bin/tool")).mode & 0o111).not.toBe(0)
    expect(fs.readlinkSync(path.join(out, "link"))).toBe("README.md")
    expect(fs.statSync(path.join(out, "empty")).size).toBe(0)
  })

  it("clones main with the stock git client: files, modes and the history of squash commits", async () => {
    await landOnMain("exp", "feature-two", { ...filesV1, "README.md": "# Export v2\n", "src/new.ts": "export {}\n" }, "Second change")
    const dest = path.join(work, "clone")
    await exec("git", ["clone", "-q", `${server.url}/uma/exp.git`, dest], { env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } })
    expect(fs.readFileSync(path.join(dest, "README.md"), "utf8")).toBe("# Export v2\n")
    expect(fs.readFileSync(path.join(dest, "src/new.ts"), "utf8")).toBe("export {}\n")
    expect(sha(fs.readFileSync(path.join(dest, "data/big.bin")))).toBe(sha(big))
    const { stdout: log } = await exec("git", ["log", "--format=%s"], { cwd: dest })
    expect(log.trim().split("\n")).toEqual(["Second change", "Add the first files"])
    const { stdout: files } = await exec("git", ["ls-files", "-s", "bin/tool", "link", "README.md"], { cwd: dest })
    expect(files).toMatch(/^100755 \S+ 0\tbin\/tool$/m)
    expect(files).toMatch(/^120000 \S+ 0\tlink$/m)
    expect(files).toMatch(/^100644 \S+ 0\tREADME.md$/m)
    await exec("git", ["fsck", "--strict"], { cwd: dest })
  })

  it("asks git for credentials on a private repository, and hides it from others", async () => {
    await api(server.url, token).post("/repos", { name: "secret" })
    await landOnMain("secret", "s", { "a.txt": "secret\n" }, "Secret")
    const url = `${server.url}/uma/secret.git`
    const anonymous = await fetch(`${url}/info/refs?service=git-upload-pack`)
    expect(anonymous.status).toBe(401)
    expect(anonymous.headers.get("www-authenticate")).toMatch(/^Basic /)
    // The same 401 for a repository that does not exist: anonymous callers learn nothing.
    expect((await fetch(`${server.url}/uma/nothing.git/info/refs?service=git-upload-pack`)).status).toBe(401)
    const failed = await exec("git", ["clone", "-q", url, path.join(work, "nope")], { env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } })
      .then(() => "cloned", (e: { stderr: string }) => e.stderr)
    expect(failed).toMatch(/could not read Username|Authentication failed/)

    const withKey = new URL(url)
    withKey.username = "uma"
    withKey.password = token
    const dest = path.join(work, "secret")
    await exec("git", ["clone", "-q", withKey.toString(), dest], { env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } })
    expect(fs.readFileSync(path.join(dest, "a.txt"), "utf8")).toBe("secret\n")

    const other = await fetch(`${url}/info/refs?service=git-upload-pack`, { headers: { authorization: `Bearer ${otherToken}` } })
    expect(other.status).toBe(404)
    expect((await fetch(`${server.url}/uma/secret/download`)).status).toBe(404)
    expect((await fetch(`${server.url}/uma/secret/download`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200)
  })
})
