/**
 * Client releases against the real server (issue 27): publishing with a `release` key of a service
 * account of the publishing organization (an admin key: 403 naming `release`; a person's session: 403),
 * 409 on the same version and platform, the public read side (list, latest, binary, sha256, minisig),
 * Debian's `minisign -Vm` over a downloaded binary (and refusing a tampered one), 404 JSON for
 * unknown releases, 400 for traversal, the audit entry, and 503 `signing_key_missing` without a key.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let keyless: GroveServer
let dir: string
let owner: string
let releaseKey: string
let adminKey: string

const publish = (base: string, token: string | undefined, version: string, platform: string, body: Uint8Array) =>
  fetch(`${base}/api/releases/${version}/${platform}`, {
    method: "PUT",
    headers: { "content-type": "application/octet-stream", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    body
  }).then(async (response) => ({ status: response.status, body: await response.json() as any }))

const setUpPublisher = async (target: GroveServer) => {
  const token = await target.createUser("olga")
  const as = api(target.url, token)
  expect((await as.post("/orgs", { slug: "grove-dev", name: "Grove" })).status).toBe(201)
  expect((await as.post("/orgs/grove-dev/service-accounts", { name: "publisher" })).status).toBe(201)
  const key = async (scopes: string) => {
    const created = await as.post("/orgs/grove-dev/service-accounts/publisher/keys", { name: scopes, scopes })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    return created.body.key as string
  }
  return { token, release: await key("release"), admin: await key("read,write,merge,admin") }
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-releases-"))
  execFileSync("minisign", ["-G", "-W", "-p", path.join(dir, "k.pub"), "-s", path.join(dir, "k.sec")], { stdio: "ignore" })
  ;[server, keyless] = await Promise.all([
    startServer({ args: ["--release-org", "grove-dev", "--release-signing-key-file", path.join(dir, "k.sec"), "--release-max-bytes", "2000000"] }),
    startServer({ env: { GROVE_RELEASE_ORG: "grove-dev" } })
  ])
  const publisher = await setUpPublisher(server)
  owner = publisher.token
  releaseKey = publisher.release
  adminKey = publisher.admin
}, 400_000)

afterAll(async () => {
  await Promise.all([server?.stop(), keyless?.stop()])
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
})

describe("client releases", () => {
  const binaryA = randomBytes(700_000)
  const binaryB = randomBytes(1000)

  it("publishes only with a release key of the publishing organization's service account", async () => {
    const admin = await publish(server.url, adminKey, "1.0.0", "linux-x86_64", binaryA)
    expect(admin.status).toBe(403)
    expect(admin.body).toMatchObject({ code: "missing_scope", scope: "release" })
    expect(admin.body.error).toContain("release")
    const session = await publish(server.url, owner, "1.0.0", "linux-x86_64", binaryA)
    expect(session.status).toBe(403)
    expect(session.body.scope).toBe("release")
    expect((await publish(server.url, undefined, "1.0.0", "linux-x86_64", binaryA)).status).toBe(401)
    expect((await api(server.url).get("/releases/1.0.0/linux-x86_64")).status).toBe(404)

    const created = await publish(server.url, releaseKey, "1.0.0", "linux-x86_64", binaryA)
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body).toMatchObject({
      version: "1.0.0",
      platform: "linux-x86_64",
      size: binaryA.length,
      sha256: createHash("sha256").update(binaryA).digest("hex"),
      url: `${server.url}/api/releases/1.0.0/linux-x86_64`
    })
    const again = await publish(server.url, releaseKey, "1.0.0", "linux-x86_64", binaryB)
    expect(again.status).toBe(409)
    expect(isErrorBody(again.body)).toBe(true)
    expect((await publish(server.url, releaseKey, "1.1.0", "linux-x86_64", binaryB)).status).toBe(201)
    expect((await publish(server.url, releaseKey, "1.1.0-rc.1", "linux-x86_64", binaryB)).status).toBe(201)
    // Past --release-max-bytes: 413, nothing recorded.
    const huge = await publish(server.url, releaseKey, "9.0.0", "linux-x86_64", new Uint8Array(2_000_001))
    expect(huge.status).toBe(413)
    expect((await api(server.url).get("/releases/9.0.0/linux-x86_64")).status).toBe(404)

    const audit = await api(server.url, owner).get("/orgs/grove-dev/audit?action=release.publish")
    expect(audit.status, JSON.stringify(audit.body)).toBe(200)
    expect(JSON.stringify(audit.body)).toContain("1.0.0/linux-x86_64")
  })

  it("serves the list, the latest, the binary, its sha256 and a signature minisign -Vm accepts", async () => {
    const anonymous = api(server.url)
    const list = await anonymous.get("/releases")
    expect(list.status).toBe(200)
    expect(list.body.releases.map((r: any) => r.version)).toEqual(["1.1.0", "1.1.0-rc.1", "1.0.0"])
    const latest = await anonymous.get("/releases/latest")
    expect(latest.body).toMatchObject({ version: "1.1.0", releases: [{ platform: "linux-x86_64" }] })

    const download = await fetch(`${server.url}/api/releases/1.0.0/linux-x86_64`)
    expect(download.status).toBe(200)
    const bytes = Buffer.from(await download.arrayBuffer())
    expect(bytes.equals(binaryA)).toBe(true)
    const sha = await (await fetch(`${server.url}/api/releases/1.0.0/linux-x86_64/sha256`)).text()
    expect(sha).toMatch(/^[0-9a-f]{64}\n$/)
    expect(sha.trim()).toBe(createHash("sha256").update(bytes).digest("hex"))

    const file = path.join(dir, "grove")
    fs.writeFileSync(file, bytes)
    fs.writeFileSync(`${file}.minisig`, await (await fetch(`${server.url}/api/releases/1.0.0/linux-x86_64/minisig`)).text())
    const verified = spawnSync("minisign", ["-Vm", file, "-p", path.join(dir, "k.pub")], { encoding: "utf8" })
    expect(verified.status, verified.stderr).toBe(0)
    expect(verified.stdout).toContain("grove 1.0.0 linux-x86_64")
    bytes[12345] = bytes[12345]! ^ 0xff
    fs.writeFileSync(file, bytes)
    expect(spawnSync("minisign", ["-Vm", file, "-p", path.join(dir, "k.pub")]).status).not.toBe(0)
  })

  it("answers 404 JSON for unknown releases and 400 for segments that are not versions or platforms", async () => {
    const anonymous = api(server.url)
    for (const route of ["/releases/2.0.0/linux-x86_64", "/releases/1.0.0/darwin-arm64", "/releases/2.0.0/linux-x86_64/sha256", "/releases/1.0.0/plan9-mips/minisig"]) {
      const reply = await anonymous.get(route)
      expect(reply.status, route).toBe(404)
      expect(isErrorBody(reply.body)).toBe(true)
    }
    for (const route of ["/releases/..%2F..%2Fetc/linux-x86_64", "/releases/1.0.0/..%2Fk.sec", "/releases/1.0.0/linux-x86_64%2F..%2F..", "/releases/1.0.0%00/linux-x86_64/sha256"]) {
      const reply = await anonymous.get(route)
      expect([400, 404], route).toContain(reply.status)
      expect(isErrorBody(reply.body), route).toBe(true)
    }
    expect((await anonymous.get("/releases/..%2F..%2Fetc/linux-x86_64")).status).toBe(400)
    expect((await publish(server.url, releaseKey, "1.0.0", "..%2F..", binaryB)).status).toBe(400)
  })

  it("answers 503 signing_key_missing when no signing key is configured", async () => {
    const publisher = await setUpPublisher(keyless)
    const reply = await publish(keyless.url, publisher.release, "1.0.0", "linux-x86_64", binaryB)
    expect(reply.status).toBe(503)
    expect(reply.body.code).toBe("signing_key_missing")
    expect((await api(keyless.url).get("/releases")).body).toEqual({ releases: [] })
  }, 120_000)
})
