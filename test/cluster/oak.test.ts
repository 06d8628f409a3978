/**
 * The public Oak client against a Grove cluster: two nodes on real Kafka, PostgreSQL and S3, behind a
 * round-robin proxy, so the requests of one client command land on both nodes in turn. Staged pushes
 * (their stage and blob proof are started on one node and continued on the other), a verified clone
 * pinned with --expected-head whose binary chunk links lead back through the proxy, and `oak watch`
 * hearing a merge over one node's event stream. Each result is read back from both nodes.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { startTwoNodes, type TwoNodes } from "../support/ClusterInfra.ts"
import { api } from "../support/http.ts"
import {
  expectSameTree,
  expectServerHas,
  expectWatchHearsMain,
  jsonOf,
  makeOak,
  noise,
  oakPath,
  ok,
  type Proxy,
  startProxy
} from "../support/Oak.ts"

const OWNER = "ona"
const REPO = `${OWNER}/clustered`
const MiB = 1024 * 1024

let nodes: TwoNodes
let proxy: Proxy
let key: string
let root: string
let home: string
let work: string
let branch: string
let chunkFetches = 0
const client = makeOak({ home: () => home, key: () => key, author: OWNER })
const oak = client.run

/** The branch as each node reads it from the shared database: both must agree. */
const headOnBothNodes = async (name: string) => {
  const [a, b] = await Promise.all([nodes.nodeA, nodes.nodeB].map((node) => api(node.url, key).get(`/${REPO}/branches/${encodeURIComponent(name)}`)))
  expect(a!.status).toBe(200)
  expect(b!.body.head).toBe(a!.body.head)
  return a!.body.head as string
}

describe.skipIf(oakPath === undefined)("the Oak client against two cluster nodes behind a round-robin proxy", () => {
  beforeAll(async () => {
    nodes = await startTwoNodes(OWNER, 15_000)
    key = nodes.key
    proxy = await startProxy([nodes.nodeA.url, nodes.nodeB.url], (request) => {
      if (request.url.includes("/chunks/fetch")) chunkFetches++
      return undefined
    })
    root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-cluster-oak-"))
    home = path.join(root, "home")
    fs.mkdirSync(home)
    work = path.join(root, "w1")
  }, 600_000)

  afterAll(async () => {
    client.killAll()
    await proxy?.close()
    await nodes?.stop()
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true })
  })

  it("a first push and a later staged push (200 files and 70 MiB) land through both nodes", async () => {
    ok(await oak(["init", "w1"], root), "oak init")
    fs.mkdirSync(path.join(work, "first"))
    for (let i = 0; i < 140; i++) fs.writeFileSync(path.join(work, "first", `f${i}.txt`), `first ${i}\n`)
    ok(await oak(["commit"], work), "oak commit")
    const first = jsonOf(ok(await oak(["push", "-r", proxy.url, "--repo", REPO, "--json"], work), "oak push (first)"))
    branch = first.branch
    expect(await headOnBothNodes(branch)).toBe(first.pushed_head)

    fs.mkdirSync(path.join(work, "later"))
    for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(work, "later", `l${i}.txt`), `later ${i}\n`)
    fs.writeFileSync(path.join(work, "big.bin"), noise(70 * MiB, 70))
    ok(await oak(["commit"], work), "oak commit")
    const before = [...proxy.forwarded]
    const later = ok(await oak(["push", "--json"], work), "oak push (staged)")
    expect(later.stderr).toMatch(/staged-v1 \(0 commit\(s\), 128 blob\(s\), 0 tree\(s\)\)/)
    expect(later.stderr).toMatch(/POST \S+\/push\/staged-v1 \(0 commit\(s\), 0 blob\(s\), 0 tree\(s\)\)/)
    // The one command's requests were spread over both nodes.
    expect(proxy.forwarded.map((n, i) => n - before[i]!).every((n) => n > 5)).toBe(true)
    const head = jsonOf(later).pushed_head as string
    expect(await headOnBothNodes(branch)).toBe(head)
    await expectServerHas(nodes.nodeA.url, key, REPO, head, work)
    const onB = await fetch(`${nodes.nodeB.url}/api/${REPO}/raw/${head}/later/l199.txt`, { headers: { authorization: `Bearer ${key}` } })
    expect(await onB.text()).toBe("later 199\n")
  }, 300_000)

  it("a verified clone pinned to the head downloads through the proxy's chunk links, from both nodes", async () => {
    const head = await headOnBothNodes(branch)
    const dest = path.join(root, "clone")
    const clone = ok(await oak(["clone", "-r", proxy.url, REPO, dest, "--branch", branch, "--expected-head", head], root), "oak clone --expected-head")
    expect(clone.stderr + clone.stdout).not.toMatch(/credential was not accepted|legacy_unverified/)
    expect(clone.stderr).toMatch(/batch_endpoint=true/)
    // The links name the host the client asked for (X-Forwarded-Host), so they came back through the proxy.
    expect(chunkFetches).toBeGreaterThan(1)
    expectSameTree(dest, work)
  }, 300_000)

  it("watch, its event stream on one node, hears a merge made through both", async () => {
    ok(await oak(["desc", "Clustered content"], work), "oak desc")
    const landed = jsonOf(ok(await oak(["merge", "--json"], work), "oak merge"))
    expect(await headOnBothNodes("main")).toBe(landed.commit_hash)
    const watched = path.join(root, "watched")
    ok(await oak(["clone", "-r", proxy.url, REPO, watched], root), "oak clone (to watch)")
    const state = await expectWatchHearsMain(client, watched, work, "heard.txt", "over the cluster's event stream\n")
    expect(state).toMatchObject({ transport: "sse", last_error: null })
    const pushed = await headOnBothNodes(state["branch"] as string)
    expect(pushed).toBe(state["last_pushed_head"])
    const heard = await fetch(`${nodes.nodeB.url}/api/${REPO}/raw/${pushed}/heard.txt`, { headers: { authorization: `Bearer ${key}` } })
    expect(await heard.text()).toBe("over the cluster's event stream\n")
  }, 300_000)
})
