// Compatibility with the public Oak client: drives the real `oak` binary (oakvcs-cli 0.109.0) against a real Grove server
// (test/support/Oak.ts finds and runs it; without it this suite is skipped with a printed reason).
// Each oak run gets a temp HOME, OAK_VERBOSE=1 (its HTTP log is in stderr, shown when an expectation fails).
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import {
  expectSameTree,
  expectServerHas as expectServerHasOf,
  expectWatchHearsMain,
  WATCHED_OWN_FILE,
  jsonOf,
  makeOak,
  noise,
  OAK_VERSION,
  oakPath,
  ok,
  rawBytes as rawBytesOf
} from "../support/Oak.ts"

let server: GroveServer
let key: string
let root: string
let home: string
const OWNER = "oakuser"
const REPO = "compat"
const PASSWORD = "oak-compat-password"

const client = makeOak({ home: () => home, key: () => key, author: OWNER })
const oak = client.run

const BIG_SIZE = 12 * 1024 * 1024
const SMALL_FILES = 140

const rawBytes = (commit: string, file: string) => rawBytesOf(server.url, key, `${OWNER}/${REPO}`, commit, file)
const expectServerHas = (commit: string, dir: string) => expectServerHasOf(server.url, key, `${OWNER}/${REPO}`, commit, dir)

const branchOnServer = async (branch: string) => {
  const reply = await api(server.url, key).get(`/${OWNER}/${REPO}/branches/${encodeURIComponent(branch)}`)
  expect(reply.status).toBe(200)
  return reply.body as { name: string; head: string | null; status: string; state: string; description: string | null; parent_branch: string | null; close_reason?: string }
}

/**
 * A pass-through proxy to the Grove server that reports a stale head on `GET branches/{branch}`:
 * the client then believes its push fast-forwards, as when another push lands between its check
 * and its publication, and Grove's own head check has to refuse it.
 */
const staleBranchProxy = async (branch: string, staleHead: string): Promise<{ url: string; close: () => Promise<void> }> => {
  const target = new URL(server.url)
  const proxy = http.createServer((request, response) => {
    const upstream = http.request({
      host: target.hostname,
      port: target.port,
      method: request.method,
      path: request.url,
      headers: { ...request.headers, host: target.host }
    }, (reply) => {
      const rewrite = request.method === "GET" && request.url === `/api/${OWNER}/${REPO}/branches/${branch}` && reply.statusCode === 200
      if (!rewrite) {
        response.writeHead(reply.statusCode ?? 502, reply.headers)
        reply.pipe(response)
        return
      }
      const parts: Array<Buffer> = []
      reply.on("data", (d: Buffer) => parts.push(d))
      reply.on("end", () => {
        const body = JSON.stringify({ ...JSON.parse(Buffer.concat(parts).toString()), head: staleHead })
        response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
        response.end(body)
      })
    })
    upstream.on("error", () => response.destroy())
    request.pipe(upstream)
  })
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve))
  const port = (proxy.address() as { port: number }).port
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => proxy.close(() => resolve()))
  }
}

describe.skipIf(oakPath === undefined)(`the Oak client ${OAK_VERSION} against Grove`, () => {
  let w1: string
  let w2: string
  let w3: string
  let watchedBranch: string
  let branch: string
  let head1: string
  let head2: string
  let head3: string

  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-oak-"))
    home = path.join(root, "home")
    fs.mkdirSync(home)
    w1 = path.join(root, "w1")
    w2 = path.join(root, "w2")
    server = await startServer()
    key = await server.createUser(OWNER, { password: PASSWORD })
    const version = await oak(["--version"], root)
    expect(version.stdout).toContain(OAK_VERSION)
  }, 120_000)

  afterAll(async () => {
    client.killAll()
    await server?.stop()
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true })
  })

  it("init, commit and a first push (over 128 files, one above 10 MiB) create the repository and the branch", async () => {
    ok(await oak(["init", "w1"], root), "oak init")
    fs.mkdirSync(path.join(w1, "src/deep/er"), { recursive: true })
    fs.mkdirSync(path.join(w1, "bin"))
    fs.mkdirSync(path.join(w1, "many"))
    fs.writeFileSync(path.join(w1, "README.md"), "# compat\n")
    fs.writeFileSync(path.join(w1, "src/deep/er/a.txt"), "nested\n")
    fs.writeFileSync(path.join(w1, "src/with space é.txt"), "unicode and a space\n")
    fs.writeFileSync(path.join(w1, "bin/run"), "#!/bin/sh\necho run\n", { mode: 0o755 })
    fs.writeFileSync(path.join(w1, "empty.txt"), "")
    fs.symlinkSync("README.md", path.join(w1, "link"))
    fs.writeFileSync(path.join(w1, "big.bin"), noise(BIG_SIZE, 7))
    for (let i = 0; i < SMALL_FILES; i++) fs.writeFileSync(path.join(w1, "many", `f${String(i).padStart(3, "0")}.txt`), `small file ${i}\n`)

    ok(await oak(["commit"], w1), "oak commit")
    const push = ok(await oak(["push", "-r", server.url, "--repo", `${OWNER}/${REPO}`, "--json"], w1), "oak push")
    const result = jsonOf(push)
    expect(result).toMatchObject({ pushed: true, published: true, repo: `${OWNER}/${REPO}` })
    branch = result.branch
    head1 = result.pushed_head
    expect(head1).toMatch(/^[0-9a-f]{64}$/)
    // Over 128 new blobs: a staged push (blob batches, trees, the commit, then the finalizer).
    expect(push.stderr).toMatch(/POST \S+\/push\/staged-v1 \(0 commit\(s\), 128 blob\(s\)/)
    expect(push.stderr).toMatch(/POST \S+\/push\/staged-v1 \(1 commit\(s\), 0 blob\(s\), 0 tree\(s\)\)/)
    expect(push.stderr).toMatch(/POST \S+\/push\/staged-v1 \(0 commit\(s\), 0 blob\(s\), 0 tree\(s\)\)/)

    const onServer = await branchOnServer(branch)
    expect(onServer).toMatchObject({ name: branch, head: head1, status: "open", parent_branch: "main" })
    const repo = await api(server.url, key).get(`/${OWNER}/${REPO}`)
    expect(repo.status).toBe(200)
    expect(repo.body.head).toBeNull()
    const pull = await api(server.url, key).get(`/${OWNER}/${REPO}/pull?branch_name=${branch}`)
    expect(pull.status).toBe(200)
    expect(pull.body.head).toBe(head1)
    expect(pull.body.commits.map((c: { hash: string }) => c.hash)).toEqual([head1])
    expect(pull.body.commits[0].author).toBe(OWNER)
    await expectServerHas(head1, w1)
    const binListing = await api(server.url, key).get(`/${OWNER}/${REPO}/tree/${head1}/bin`)
    expect(binListing.body.entries).toEqual([expect.objectContaining({ name: "run", mode: "executable" })])
  }, 180_000)

  it("desc syncs the branch description", async () => {
    const desc = ok(await oak(["desc", "Compatibility suite branch"], w1), "oak desc")
    expect(desc.stdout + desc.stderr).not.toMatch(/couldn't sync/i)
    expect((await branchOnServer(branch)).description).toBe("Compatibility suite branch")
  })

  it("a clone of a repository whose main is empty succeeds, and switch fetches the pushed branch", async () => {
    const clone = ok(await oak(["clone", "-r", server.url, `${OWNER}/${REPO}`, "w2"], root), "oak clone")
    expect(clone.stdout).toMatch(/Cloned '.*' with 0 commit\(s\)/)
    expect(fs.existsSync(path.join(w2, ".oak"))).toBe(true)
    expect(fs.existsSync(path.join(w2, ".oak", "CLONE_IN_PROGRESS"))).toBe(false)
    ok(await oak(["switch", branch], w2), "oak switch")
    expectSameTree(w2, w1)
  }, 120_000)

  it("a second push sends only the changed chunk of the large file, and pull brings it to the other checkout", async () => {
    const big = path.join(w1, "big.bin")
    const bytes = fs.readFileSync(big)
    bytes.write("patched in the middle", 5_000_000)
    fs.writeFileSync(big, bytes)
    fs.writeFileSync(path.join(w1, "README.md"), "# compat, second version\n")
    fs.rmSync(path.join(w1, "many/f007.txt"))
    fs.writeFileSync(path.join(w1, "src/deep/new.txt"), "added\n")
    fs.chmodSync(path.join(w1, "bin/run"), 0o644)
    ok(await oak(["commit"], w1), "oak commit")
    const push = ok(await oak(["push", "--json"], w1), "oak push")
    head2 = jsonOf(push).pushed_head
    expect(head2).toMatch(/^[0-9a-f]{64}$/)
    // Grove chunked the first, inline version of big.bin itself: its FastCDC cut the same chunks as the client's,
    // so chunks/check asks for the one rewritten chunk only.
    const checked = Number(/chunks\/check \((\d+) hashes\)/.exec(push.stderr)?.[1])
    const uploaded = Number(/uploading (\d+) large chunk\(s\)/.exec(push.stderr)?.[1])
    expect(checked).toBeGreaterThan(2)
    expect(uploaded).toBe(1)
    expect((await branchOnServer(branch)).head).toBe(head2)
    await expectServerHas(head2, w1)
    expect((await rawBytes(head2, "many/f007.txt")).status).toBe(404)

    const pull = jsonOf(ok(await oak(["pull", "--json"], w2), "oak pull"))
    expect(pull).toMatchObject({ head_before: head1, head_after: head2, branch_update: "fast_forward" })
    expectSameTree(w2, w1)
  }, 120_000)

  it("a push from a stale checkout is refused, then pull converges and the push lands", async () => {
    fs.writeFileSync(path.join(w1, "many/f001.txt"), "changed in w1\n")
    ok(await oak(["commit"], w1), "oak commit")
    head3 = jsonOf(ok(await oak(["push", "--json"], w1), "oak push")).pushed_head

    fs.writeFileSync(path.join(w2, "many/f002.txt"), "changed in w2\n")
    ok(await oak(["commit"], w2), "oak commit")
    // The client sees the newer branch head itself and stops before publishing.
    const refused = await oak(["push", "--json"], w2)
    expect(refused.code).toBe(5)
    expect(jsonOf(refused).error.message).toContain("oak pull")
    expect((await branchOnServer(branch)).head).toBe(head3)

    // With the newer head hidden from the client, Grove's own head check refuses the publication.
    const proxy = await staleBranchProxy(branch, head2)
    try {
      // OAK_REMOTE rather than -r: nothing about the proxy is stored in the checkout.
      const raced = await oak(["push", "--json"], w2, { OAK_REMOTE: proxy.url })
      expect(raced.stderr).toMatch(/POST \S+\/push \(1 commit\(s\)/)
      expect(raced.stderr).toContain("publication returned 200 OK")
      expect(raced.code).toBe(5)
      expect(jsonOf(raced).error.message).toMatch(/^Conflict detected: remote has diverged/)
    } finally {
      await proxy.close()
    }
    expect((await branchOnServer(branch)).head).toBe(head3)

    // pull re-parents the local commit onto the server's head (the server answers 409 to its unpublished `since`).
    const pull = jsonOf(ok(await oak(["pull", "--json"], w2), "oak pull"))
    expect(pull).toMatchObject({ branch_update: "reparented" })
    expect(fs.readFileSync(path.join(w2, "many/f001.txt"), "utf8")).toBe("changed in w1\n")
    expect(fs.readFileSync(path.join(w2, "many/f002.txt"), "utf8")).toBe("changed in w2\n")
    const landed = jsonOf(ok(await oak(["push", "--json"], w2), "oak push"))
    expect(landed.pushed).toBe(true)
    const head4 = landed.pushed_head
    expect((await branchOnServer(branch)).head).toBe(head4)
    await expectServerHas(head4, w2)

    ok(await oak(["pull"], w1), "oak pull")
    expectSameTree(w1, w2)
  }, 180_000)

  it("close syncs the closed status and its reason", async () => {
    const close = ok(await oak(["close", "--reason", "superseded"], w1), "oak close")
    expect(close.stdout + close.stderr).not.toMatch(/couldn't sync/i)
    expect(await branchOnServer(branch)).toMatchObject({ status: "closed", close_reason: "superseded", description: "Compatibility suite branch" })
  })

  it("merge lands a branch on main; a clone then has main's files, and pull follows later merges (parent sync over raw)", async () => {
    ok(await oak(["switch", "-c", "merge-me"], w1), "oak switch -c")
    fs.writeFileSync(path.join(w1, "src/merged.txt"), "lands on main\n")
    ok(await oak(["commit"], w1), "oak commit")
    ok(await oak(["desc", "Land the compat files"], w1), "oak desc")
    const merged = jsonOf(ok(await oak(["merge", "--json"], w1), "oak merge"))
    expect(merged).toMatchObject({ merged: true, branch: "merge-me", parent: "main", message: "Land the compat files" })
    const main1 = merged.commit_hash as string
    expect(main1).toMatch(/^[0-9a-f]{64}$/)
    expect((await api(server.url, key).get(`/${OWNER}/${REPO}`)).body.head).toBe(main1)
    expect((await branchOnServer("main")).head).toBe(main1)
    expect((await branchOnServer("merge-me")).status).not.toBe("open")
    await expectServerHas(main1, w1)

    w3 = path.join(root, "w3")
    const clone = ok(await oak(["clone", "-r", server.url, `${OWNER}/${REPO}`, "w3"], root), "oak clone")
    expect(clone.stdout).toMatch(/Cloned '.*' with [1-9]\d* commit\(s\)/)
    expectSameTree(w3, w1)

    // merge left w1 on a fresh personal branch from main.
    fs.writeFileSync(path.join(w1, "README.md"), "# compat, after the first merge\n")
    fs.rmSync(path.join(w1, "many/f003.txt"))
    ok(await oak(["commit"], w1), "oak commit")
    ok(await oak(["desc", "Second landing"], w1), "oak desc")
    const second = jsonOf(ok(await oak(["merge", "--json"], w1), "oak merge"))
    expect(second.merged).toBe(true)
    expect((await branchOnServer("main")).head).toBe(second.commit_hash)

    const pull = ok(await oak(["pull", "--json"], w3), "oak pull")
    // Parent sync: main's head through commits/info, the one changed file (README.md) through GET raw/{commit}/{path}.
    expect(pull.stdout + pull.stderr).toContain("downloaded 1 new file(s)")
    expect(jsonOf(pull).head_after).toBe(second.commit_hash)
    expectSameTree(w3, w1)
  }, 180_000)

  it("headless login: the sign-in page's Oak button gives the username:key code oak login takes when no browser opens", async () => {
    const page = await fetch(`${server.url}/cli-auth`)
    const cookie = (page.headers.get("set-cookie") ?? "").split(";")[0]!
    const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!
    const form = new URLSearchParams({ csrf, callback: "", state: "", username: OWNER, password: PASSWORD, client: "oak" })
    const signedIn = await fetch(`${server.url}/cli-auth`, {
      method: "POST",
      headers: { cookie, origin: server.url, "content-type": "application/x-www-form-urlencoded" },
      body: form.toString()
    })
    expect(signedIn.status).toBe(200)
    expect(signedIn.headers.get("cache-control")).toBe("no-store")
    const code = /<p class="code" id="code">([^<]+)<\/p>/.exec(await signedIn.text())![1]!
    expect(code).toMatch(new RegExp(`^${OWNER}:\\S+$`))
    // A fresh HOME and no key in the environment: only what oak login stores.
    const fresh = path.join(root, "fresh-home")
    fs.mkdirSync(fresh)
    const env = { HOME: fresh, OAK_API_KEY: "", OAK_BROWSER: "false" }
    const login = ok(await oak(["login", "-r", server.url], root, env, `${code}\n`), "oak login (headless)")
    expect(login.stdout + login.stderr).toContain("/cli-auth")
    // The code's username part is what the client stores as who signed in.
    expect(ok(await oak(["whoami", "-r", server.url], root, env), "oak whoami").stdout.trim()).toBe(OWNER)
    const listed = jsonOf(ok(await oak(["repo", "list", "-r", server.url, "--json"], root, env), "oak repo list (after login)"))
    expect(listed.repos.map((r: { name: string }) => r.name)).toContain(REPO)
  })

  it("the interactive first push picks the organization from GET /orgs ({organizations: [...]}) and creates the repository there", async () => {
    expect((await api(server.url, key).post("/orgs", { slug: "oak-team", name: "Oak Team" })).status).toBe(201)
    const listed = (await api(server.url, key).get("/orgs")).body.organizations as Array<{ slug: string }>
    const index = listed.findIndex((o) => o.slug === "oak-team")
    expect(index).toBeGreaterThanOrEqual(0)
    const dir = path.join(root, "picked")
    ok(await oak(["init", "picked"], root), "oak init")
    fs.writeFileSync(path.join(dir, "hello.txt"), "placed by the organization picker\n")
    ok(await oak(["commit"], dir), "oak commit")
    const pushed = ok(await client.terminal(["push", "-r", server.url], dir, [
      [/Configure remote organization and repo name\?/, "\r"],
      [/\+ Create new organization/, `${"\x1b[B".repeat(index)}\r`],
      [/Repo name \(under oak-team\)/, "\r"],
      [/on main now\?/, "n\r"]
    ]), "oak push (interactive)")
    expect(pushed.stdout).toContain("Linked to oak-team/picked")
    const pushedBranch = /branches\/([A-Za-z0-9._-]+)/.exec(pushed.stdout)![1]!
    const onServer = await api(server.url, key).get(`/oak-team/picked/branches/${pushedBranch}`)
    expect(onServer.status).toBe(200)
    const raw = await rawBytesOf(server.url, key, "oak-team/picked", onServer.body.head, "hello.txt")
    expect(raw.bytes.toString()).toBe("placed by the organization picker\n")
  })

  it("repo list reads the repository listing ({repos: [...]})", async () => {
    const listed = jsonOf(ok(await oak(["repo", "list", "-r", server.url, "--json"], w1), "oak repo list"))
    const repos: Array<{ full_name?: string; name?: string; owner?: string }> = Array.isArray(listed) ? listed : listed.repos
    expect(repos.some((r) => r.full_name === `${OWNER}/${REPO}` || (r.owner === OWNER && r.name === REPO))).toBe(true)
  })

  it("oak site enable, show, list and disable manage the organization's site; show without a token reads a published one", async () => {
    expect((await api(server.url, key).post("/repos", { name: "www", organization_slug: OWNER, is_public: true })).status).toBe(201)
    const remote = ["--remote", server.url]
    ok(await oak(["site", "enable", "--repo", `${OWNER}/www`, "--source", "/docs", ...remote], root), "oak site enable")
    const saved = await api(server.url).get(`/orgs/${OWNER}/site`)
    expect(saved.body).toMatchObject({ organization_slug: OWNER, repo_name: "www", branch: "main", source_dir: "/docs" })
    const shown = ok(await oak(["site", "show", "--organization", OWNER, ...remote], root), "oak site show")
    expect(shown.stdout).toContain("www")
    expect(shown.stdout).toContain(saved.body.url)
    expect(ok(await oak(["site", "list", ...remote], root), "oak site list").stdout).toContain(OWNER)
    ok(await oak(["site", "disable", "--organization", OWNER, ...remote], root), "oak site disable")
    expect((await api(server.url).get(`/orgs/${OWNER}/site`)).status).toBe(404)
    const none = await oak(["site", "show", "--organization", OWNER, ...remote], root)
    expect(`${none.stdout}${none.stderr}`.toLowerCase()).toMatch(/no site|not enabled|disabled|no .*site/)
  })

  it("branch list --remote reports merged branches closed, as the client knows them", async () => {
    const listed = ok(await oak(["branch", "list", "--remote", "--json"], w1), "oak branch list --remote")
    const rows = jsonOf(listed)
    const branches: Array<{ name: string; status: string }> = Array.isArray(rows) ? rows : rows.branches
    expect(branches.find((b) => b.name === "merge-me")?.status).toBe("closed")
    const open = jsonOf(ok(await oak(["branch", "list", "--remote", "--status", "open", "--json"], w1), "oak branch list --status open"))
    const openNames = (Array.isArray(open) ? open : open.branches).map((b: { name: string }) => b.name)
    expect(openNames).not.toContain("merge-me")
    // Grove's own record keeps the richer state.
    expect((await branchOnServer("merge-me")).state).toBe("merged")
  })
  it("watch hears main move on the event stream: a merge reaches a watching checkout in seconds, and it pushes its branch", async () => {
    const state = await expectWatchHearsMain(client, w3, w1, "watched.txt", "heard over the event stream\n")
    // The activity heartbeat is not a Grove feature: its 404 reads as "unsupported" and the daemon carries on.
    expect(state).toMatchObject({ transport: "sse", heartbeat: "unsupported", last_error: null })
    watchedBranch = state["branch"] as string
    const watched = await branchOnServer(watchedBranch)
    expect(watched.head).toBe(state["last_pushed_head"])
    expect((await rawBytes(watched.head!, "watched.txt")).bytes.toString()).toBe("heard over the event stream\n")
    expect((await rawBytes(watched.head!, WATCHED_OWN_FILE.path)).bytes.toString()).toBe(WATCHED_OWN_FILE.text)
  }, 120_000)

  it("the remote reads (log, branch review with a merge preview, space repos, auth status, fetch, open) show what the server has; rename answers the spec's 503", async () => {
    const main = (await branchOnServer("main")).head!
    const log = jsonOf(ok(await oak(["log", "--json", "--remote"], w1), "oak log --remote"))
    expect(log).toMatchObject({ kind: "remote_log", branch: "main", head: main })
    expect(log.commits[0].hash).toBe(main)
    const review = jsonOf(ok(await oak(["branch", "review", watchedBranch, "--remote", "--merge-preview", "--json"], w1), "oak branch review --remote"))
    expect(review).toMatchObject({ branch: watchedBranch, against: "main", branch_head: (await branchOnServer(watchedBranch)).head })
    expect(review.changed_files).toEqual([expect.objectContaining({ path: WATCHED_OWN_FILE.path, status: "added" })])
    const space = ok(await oak(["space", "repos", OWNER, "-r", server.url], w1), "oak space repos")
    expect(space.stdout).toContain(`${OWNER}/${REPO}`)
    const auth = ok(await oak(["auth", "status"], w1), "oak auth status")
    expect(auth.stdout).toMatch(new RegExp(`Identity: ${OWNER}\\b`))
    const fetched = ok(await oak(["fetch"], w1), "oak fetch")
    expect(fetched.stdout + fetched.stderr).toContain("Updating 'main'")
    expect(ok(await oak(["open", "--print"], w1), "oak open --print").stdout.trim()).toBe(`${server.url}/${OWNER}/${REPO}`)
    const renamed = await oak(["branch", "rename", watchedBranch, "renamed"], w3)
    expect(renamed.code).not.toBe(0)
    expect(renamed.stderr).toContain("renaming branches is temporarily disabled")
    expect((await branchOnServer(watchedBranch)).status).toBe("open")
  })

  // FUSE needs the device; fusermount3 comes from scripts/setup/system-deps.sh.
  it.skipIf(!fs.existsSync("/dev/fuse"))("mount reads files lazily from the server, and mount finish publishes the mount's work as a branch", async () => {
    const dest = path.join(root, "mounted")
    fs.mkdirSync(dest)
    const env = { OAK_WATCH: "0" }
    ok(await oak(["mount", `${OWNER}/${REPO}`, dest, "-r", server.url], root, env), "oak mount")
    try {
      // main's files, fetched on first read (chunks/download, then the chunk links).
      expect(fs.readFileSync(path.join(dest, "watched.txt"), "utf8")).toBe("heard over the event stream\n")
      expect(fs.readFileSync(path.join(dest, "big.bin")).equals(fs.readFileSync(path.join(w1, "big.bin")))).toBe(true)
      fs.writeFileSync(path.join(dest, "from-mount.txt"), "written in a mount\n")
      const finished = jsonOf(ok(await oak(["mount", "finish", dest, "--desc-file", "-", "--json"], root, env, "Work from a mount"), "oak mount finish"))
      const pushed = await branchOnServer(finished.virtual_branch)
      expect(pushed).toMatchObject({ head: finished.head_after, description: "Work from a mount", parent_branch: "main" })
      expect((await rawBytes(pushed.head!, "from-mount.txt")).bytes.toString()).toBe("written in a mount\n")
    } finally {
      await oak(["mount", "end", dest], root, env)
      // Never leave a mount behind (the temporary directory could not be removed).
      if (fs.readFileSync("/proc/mounts", "utf8").includes(` ${dest} `)) spawnSync("fusermount3", ["-u", "-z", dest])
    }
    expect(fs.existsSync(path.join(dest, "from-mount.txt"))).toBe(false)
  }, 120_000)

  it("findings and feedback, which Grove does not provide, answer the errors the client explains best", async () => {
    const findings = await oak(["findings", "list", "--json"], w1)
    expect(findings.code).not.toBe(0)
    expect(jsonOf(findings).error.message).toContain("review findings are not enabled for this repository")
    const feedback = await oak(["feedback", "-m", "a note for the Oak team"], w1)
    expect(feedback.code).toBe(1)
    expect(feedback.stderr).toContain("does not collect Oak client feedback")
    const links = await oak(["feedback", "link", "fb-1", "--branch", "x"], w1)
    expect(links.stderr).toContain("not authorized (or unknown item)")
    const preferences = await api(server.url, key).get("/user/preferences")
    expect(preferences).toMatchObject({ status: 404, body: { code: "preferences_not_supported" } })
  })

  it("oak ci: the runs a push starts, status, wait, logs, the exact-head trigger and its replay, rerun, cancel of a push run", async () => {
    // w1 is on a fresh branch from main (the merge above moved it there).
    fs.mkdirSync(path.join(w1, ".oak/workflows"), { recursive: true })
    fs.writeFileSync(path.join(w1, ".oak/workflows/check.yml"), "jobs:\n  check:\n    steps:\n      - run: echo checked $GROVE_COMMIT\n")
    ok(await oak(["commit"], w1), "oak commit")
    const pushed = jsonOf(ok(await oak(["push", "--json"], w1), "oak push"))
    const head = pushed.pushed_head as string
    // The branch's first push (branch.created) runs check.yml; oak waits on the head's runs.
    const waited = ok(await oak(["ci", "wait", "--current", "--timeout", "90", "--json"], w1), "oak ci wait --current")
    expect(waited.stdout).toContain("success")
    const status = jsonOf(ok(await oak(["ci", "status", "--json"], w1), "oak ci status"))
    expect(status).toMatchObject({ state: "success", commit: head })
    const runs = jsonOf(ok(await oak(["ci", "runs", "--json"], w1), "oak ci runs")).runs
    const check = runs.find((r: { workflow_name: string }) => r.workflow_name === "check")
    expect(check).toMatchObject({ commit_hash: head, status: "completed", conclusion: "success" })
    const logs = ok(await oak(["ci", "logs", String(check.id)], w1), "oak ci logs")
    expect(logs.stdout).toContain(`checked ${head}`)

    const trigger = ["ci", "trigger", "--expected-commit", head, "--idempotency-key", "oak-key-1", "--workflow", "check", "--json"]
    const receipt = jsonOf(ok(await oak(trigger, w1), "oak ci trigger"))
    expect(receipt).toMatchObject({ protocol: "ordinary_trigger_v1", commit_hash: head, replayed: false })
    expect(jsonOf(ok(await oak(trigger, w1), "oak ci trigger (retry)"))).toMatchObject({ run_ids: receipt.run_ids, replayed: true })
    const stale = await oak(["ci", "trigger", "--expected-commit", "0".repeat(64), "--idempotency-key", "oak-key-2", "--workflow", "check"], w1)
    expect(stale.code).not.toBe(0)
    expect(stale.stderr).toContain("412")
    ok(await oak(["ci", "wait", String(receipt.run_ids[0]), "--timeout", "60"], w1), "oak ci wait (trigger)")
    const rerun = jsonOf(ok(await oak(["ci", "rerun", String(check.id), "--json"], w1), "oak ci rerun"))
    expect(JSON.stringify(rerun)).toMatch(/run_ids|"id"/)

    // A second push adds and runs slow.yml (on: push; added with the first push, it would have run on that one too,
    // and kept oak ci wait --current waiting); oak cancels that exact run.
    fs.writeFileSync(path.join(w1, ".oak/workflows/slow.yml"), "on: [push]\njobs:\n  wait:\n    steps:\n      - run: echo waiting; sleep 120\n")
    fs.writeFileSync(path.join(w1, "README.md"), "# compat, with CI\n")
    ok(await oak(["commit"], w1), "oak commit")
    const second = jsonOf(ok(await oak(["push", "--json"], w1), "oak push")).pushed_head as string
    let slow: { id: number; status: string } | undefined
    for (let i = 0; i < 100 && slow?.status !== "running"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200))
      slow = jsonOf(ok(await oak(["ci", "runs", "--json"], w1), "oak ci runs")).runs.find((r: { workflow_name: string; commit_hash: string }) => r.workflow_name === "slow" && r.commit_hash === second)
    }
    expect(slow?.status).toBe("running")
    const cancelled = ok(await oak(["ci", "cancel", String(slow!.id), "--commit", second, "--json"], w1), "oak ci cancel")
    expect(cancelled.stdout).toContain("cancel")
    const after = await api(server.url, key).get(`/${OWNER}/${REPO}/ci/runs/${slow!.id}`)
    expect(after.body).toMatchObject({ status: "completed", conclusion: "cancelled" })
  }, 240_000)

  it("a commit holding .grove (where a grove checkout keeps its config), at the root or deeper, is refused by the server; nothing is published", async () => {
    const w5 = path.join(root, "w5")
    ok(await oak(["init", "w5"], root), "oak init")
    fs.mkdirSync(path.join(w5, ".GROVE"))
    fs.writeFileSync(path.join(w5, ".GROVE/config.json"), '{"remote":"https://attacker.example/x"}\n')
    fs.writeFileSync(path.join(w5, "README.md"), "innocent\n")
    ok(await oak(["commit"], w5), "oak commit")
    /** Branches with a head: what a push publishes. */
    const published = async () => {
      const listed = await api(server.url, key).get(`/${OWNER}/${REPO}/branches`)
      return listed.status === 200 ? listed.body.branches.filter((b: { head: string | null }) => b.head !== null) : []
    }
    const before = await published()
    const refused = await oak(["push", "-r", server.url, "--repo", `${OWNER}/${REPO}`, "--json"], w5)
    expect(refused.code, refused.stderr).not.toBe(0)
    // The client does not show the body (it may hold secrets): the server's 400 invalid_tree is what it reports.
    expect(jsonOf(refused).error.message).toContain("rejected with HTTP 400")
    expect(await published()).toEqual(before)

    // Deeper down too (grove's walk skips a .grove folder at any depth: a clone would lose its files).
    const w6 = path.join(root, "w6")
    ok(await oak(["init", "w6"], root), "oak init")
    fs.mkdirSync(path.join(w6, "docs/.grove"), { recursive: true })
    fs.writeFileSync(path.join(w6, "docs/.grove/notes.txt"), "notes\n")
    fs.writeFileSync(path.join(w6, "README.md"), "innocent\n")
    ok(await oak(["commit"], w6), "oak commit")
    const deep = await oak(["push", "-r", server.url, "--repo", `${OWNER}/${REPO}`, "--json"], w6)
    expect(deep.code, deep.stderr).not.toBe(0)
    expect(jsonOf(deep).error.message).toContain("rejected with HTTP 400")
    expect(await published()).toEqual(before)
  }, 120_000)
})
