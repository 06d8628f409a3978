/**
 * `grove watch` (packages/cli/src/watch/): with a checkout's watcher running, `grove push` and `grove status` stat only
 * the paths changed since their last look, and never miss a change: an edit made just before a push (even when the
 * daemon reads its events late: the answer waits for the client's cookie), a file in a new directory and in a
 * directory made since, and every change after the daemon was killed (the client then checks every file).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type GroveServer, ROOT } from "../support/GroveServer.ts"
import { at, builtinsOf, grove, type GroveOptions, json, ok, REPORT_BUILTINS, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions
const daemons: Array<number> = []

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
}, 300_000)

afterAll(async () => {
  for (const pid of daemons) if (alive(pid)) process.kill(pid, "SIGTERM")
  await stopSuiteServers()
})

const settle = () => new Promise((resolve) => setTimeout(resolve, 2_100))

/** A pushed checkout of 30 files whose index is settled (status recorded it), with its watcher started. */
const watched = async (name: string, daemonEnv: Record<string, string> = {}) => {
  const work = tempDir(name)
  await ok(["init", "--name", name], at(alice, work))
  for (let i = 0; i < 30; i++) {
    fs.mkdirSync(path.join(work, `d${i % 3}/e`), { recursive: true })
    fs.writeFileSync(path.join(work, `d${i % 3}/e/file-${i}.txt`), `file ${i}\n`)
  }
  await ok(["push"], at(alice, work))
  await settle()
  await ok(["status"], at(alice, work))
  const started = json(await ok(["watch", "start", "--json"], { ...at(alice, work), env: { ...alice.env!, ...daemonEnv } }))
  expect(started).toMatchObject({ running: true, started: true })
  daemons.push(started.pid)
  return { work, pid: started.pid as number }
}

const pushed = async (work: string): Promise<number> => json(await ok(["push", "--json"], at(alice, work))).pushed_commits
const tokenFile = (work: string) => path.join(work, ".grove/watch/token.json")

describe("grove watch", () => {
  it("sees an edit made right before a push or status, even from a daemon that reads its events late", async () => {
    // Every event reaches the daemon 300 ms late: only the cookie makes its answer wait for the edit's.
    const { work } = await watched("we", { GROVE_WATCH_TEST_EVENT_DELAY_MS: "300" })
    expect(await pushed(work)).toBe(0)
    expect(fs.existsSync(tokenFile(work))).toBe(true) // the tree was seen as the index under a token
    for (let i = 0; i < 3; i++) {
      fs.appendFileSync(path.join(work, "d1/e/file-4.txt"), `edit ${i}\n`)
      expect(json(await ok(["status", "--json"], at(alice, work))).changes).toEqual([{ path: "d1/e/file-4.txt", change_type: "modified" }])
      fs.appendFileSync(path.join(work, "d2/e/file-5.txt"), `edit ${i}\n`)
      expect(await pushed(work)).toBe(1)
      await settle()
      await ok(["status"], at(alice, work))
      expect(await pushed(work)).toBe(0)
    }
  }, 240_000)

  it("sees a file in a new directory, and a file added later in that directory", async () => {
    const { work } = await watched("wd")
    expect(await pushed(work)).toBe(0)
    fs.mkdirSync(path.join(work, "n/m"), { recursive: true })
    fs.writeFileSync(path.join(work, "n/m/f.txt"), "new\n")
    expect(await pushed(work)).toBe(1)
    await settle()
    await ok(["status"], at(alice, work))
    expect(await pushed(work)).toBe(0)
    // The token is for the index as it is now: the next push asks the daemon what changed, and stats only that.
    const tokenFor = JSON.parse(fs.readFileSync(tokenFile(work), "utf8")).index.split("\0")
    expect(tokenFor.slice(0, 2)).toEqual([path.join(work, ".grove/index.json"), String(fs.statSync(path.join(work, ".grove/index.json")).ino)])
    // Seen only if the daemon watches the directory it was told about.
    fs.writeFileSync(path.join(work, "n/m/g.txt"), "later\n")
    expect(await pushed(work)).toBe(1)
  }, 240_000)

  it("falls back to checking every file when the daemon was killed, starts again over its stale socket, and ends with the checkout", async () => {
    const { pid, work } = await watched("wk")
    expect(await pushed(work)).toBe(0)
    process.kill(pid, "SIGKILL")
    while (alive(pid)) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(fs.existsSync(path.join(work, ".grove/watch/sock"))).toBe(true) // left behind
    fs.appendFileSync(path.join(work, "d0/e/file-3.txt"), "unseen by any daemon\n")
    expect(await pushed(work)).toBe(1)
    expect(json(await ok(["watch", "status", "--json"], at(alice, work)))).toMatchObject({ running: false })

    const again = json(await ok(["watch", "start", "--json"], at(alice, work)))
    expect(again).toMatchObject({ running: true, started: true })
    daemons.push(again.pid)
    expect(json(await ok(["watch", "start", "--json"], at(alice, work)))).toMatchObject({ started: false, pid: again.pid })
    await settle()
    await ok(["status"], at(alice, work))
    expect(await pushed(work)).toBe(0)
    // A restarted daemon does not know the last one's token: the client checks every file, and sees this.
    fs.appendFileSync(path.join(work, "d0/e/file-6.txt"), "edit\n")
    expect(await pushed(work)).toBe(1)

    fs.rmSync(work, { recursive: true, force: true })
    for (let i = 0; i < 500 && alive(again.pid); i++) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(alive(again.pid)).toBe(false)
  }, 240_000)

  it("watches a directory removed and made again at once (rm -rf a && mkdir a)", async () => {
    // Events handled 300 ms late: the daemon sees d1's removal once the new d1 is there.
    const { work } = await watched("wr", { GROVE_WATCH_TEST_EVENT_DELAY_MS: "300" })
    expect(await pushed(work)).toBe(0)
    // A build-output style refresh: the old directory's watch follows its inode away; the new one must be watched.
    fs.rmSync(path.join(work, "d1"), { recursive: true })
    fs.mkdirSync(path.join(work, "d1"))
    fs.writeFileSync(path.join(work, "d1/g.txt"), "g\n")
    expect(await pushed(work)).toBe(1)
    await settle()
    await ok(["status"], at(alice, work))
    expect(await pushed(work)).toBe(0)
    expect(fs.existsSync(tokenFile(work))).toBe(true)
    fs.appendFileSync(path.join(work, "d1/g.txt"), "edit\n")
    expect(json(await ok(["status", "--json"], at(alice, work))).changes).toEqual([{ path: "d1/g.txt", change_type: "modified" }])
    expect(await pushed(work)).toBe(1)
  }, 240_000)

  it("sees a file named .grove below the root come and go: listed as one that cannot be committed (servers refuse .grove at any depth)", async () => {
    const { work } = await watched("wg")
    expect(await pushed(work)).toBe(0)
    fs.writeFileSync(path.join(work, "d0/.grove"), "one\n")
    const listed = json(await ok(["status", "--json"], at(alice, work)))
    expect(listed.changes).toEqual([])
    expect(listed.invalid_paths.map((i: { path: string }) => i.path)).toEqual(["d0/.grove"])
    const refused = await grove(["push", "--json"], at(alice, work))
    expect([refused.code, JSON.parse(refused.stdout).code], refused.stdout).toEqual([1, "invalid_path"])
    fs.rmSync(path.join(work, "d0/.grove"))
    expect(json(await ok(["status", "--json"], at(alice, work)))).toMatchObject({ changes: [], invalid_paths: [] })
    expect(await pushed(work)).toBe(0)
  }, 240_000)

  it("takes nothing from a checkout made inside it (git's nested repository rule), and its files once its .grove is gone", async () => {
    const { work } = await watched("wn")
    expect(await pushed(work)).toBe(0)
    // A clone killed before it finished, inside this checkout: its files are not this checkout's new files.
    const dest = path.join(work, "dest")
    fs.mkdirSync(path.join(dest, ".grove/objects"), { recursive: true })
    fs.mkdirSync(path.join(dest, "src"))
    fs.writeFileSync(path.join(dest, "src/b.txt"), "b\n")
    expect(json(await ok(["status", "--json"], at(alice, work))).changes).toEqual([])
    expect(await pushed(work)).toBe(0)
    // Run in it: the warning once (a command looks its checkout up twice), and no checkout.
    const inside = await grove(["status"], at(alice, dest))
    expect({ code: inside.code, warnings: inside.stderr.split("did not finish").length - 1 }).toEqual({ code: 1, warnings: 1 })
    await settle()
    await ok(["status"], at(alice, work))
    expect(await pushed(work)).toBe(0)
    expect(fs.existsSync(tokenFile(work))).toBe(true)
    // Its files are not watched: a file written there leaves the push to the quick path (no full command loaded).
    fs.writeFileSync(path.join(dest, "src/c.txt"), "c\n")
    const env = { ...alice.env!, GROVE_BUNDLE: "1", NODE_OPTIONS: `--import ${REPORT_BUILTINS}` }
    const quick = await ok(["push", "--json"], { ...at(alice, work), env })
    expect({ pushed: json(quick).pushed_commits, loaded: builtinsOf(quick.stderr).filter((n) => n === "fs/promises") })
      .toEqual({ pushed: 0, loaded: [] })
    fs.writeFileSync(path.join(work, "d0/e/file-0.txt"), "edited\n")
    expect(json(await ok(["status", "--json"], at(alice, work))).changes).toEqual([{ path: "d0/e/file-0.txt", change_type: "modified" }])
    expect(await pushed(work)).toBe(1)
    await settle()
    await ok(["status"], at(alice, work))
    // Its .grove removed: its files are this checkout's (the watcher reports the directory, the walk goes in).
    fs.rmSync(path.join(dest, ".grove"), { recursive: true })
    expect(json(await ok(["status", "--json"], at(alice, work))).changes).toEqual([
      { path: "dest/src/b.txt", change_type: "added" },
      { path: "dest/src/c.txt", change_type: "added" }
    ])
    expect(await pushed(work)).toBe(1)
  }, 240_000)

  it("sees an edit lost in an overflow of the kernel's queue by events of a directory moved out", async () => {
    const { pid, work } = await watched("wo")
    expect(await pushed(work)).toBe(0)
    expect(fs.existsSync(tokenFile(work))).toBe(true)
    // Made after the token, and gone by the next question: "made and removed since", which alone forces no full check.
    fs.mkdirSync(path.join(work, "junk"))
    await new Promise((resolve) => setTimeout(resolve, 500)) // the daemon watches junk
    const limit = Number(fs.readFileSync("/proc/sys/fs/inotify/max_queued_events", "utf8"))
    const out = fs.mkdtempSync("/tmp/grove-watch-out-")
    try {
      process.kill(pid, "SIGSTOP") // a daemon not scheduled for a while (load)
      fs.renameSync(path.join(work, "junk"), path.join(out, "junk"))
      // Still watched by the daemon: these fill the kernel's queue, and libuv drops them once that watch is closed.
      for (let i = 0; i <= limit; i++) fs.writeFileSync(path.join(out, "junk", `f${i}`), "")
      fs.appendFileSync(path.join(work, "d0/e/file-0.txt"), "edit\n") // the queue is full: this event is lost
      process.kill(pid, "SIGCONT")
      expect(json(await ok(["status", "--json"], at(alice, work))).changes).toEqual([{ path: "d0/e/file-0.txt", change_type: "modified" }])
      expect(await pushed(work)).toBe(1)
    } finally {
      process.kill(pid, "SIGCONT")
      fs.rmSync(out, { recursive: true, force: true })
    }
  }, 240_000)

  it("keeps no token while a file has another hard link: a write through it makes no event in the checkout", async () => {
    const { work } = await watched("wl")
    const outside = path.join(fs.mkdtempSync("/tmp/grove-watch-link-"), "other-name")
    try {
      fs.linkSync(path.join(work, "d2/e/file-2.txt"), outside)
      await settle()
      await ok(["status"], at(alice, work))
      expect(await pushed(work)).toBe(0)
      fs.appendFileSync(outside, "written through the other name\n")
      expect(json(await ok(["status", "--json"], at(alice, work))).changes).toEqual([{ path: "d2/e/file-2.txt", change_type: "modified" }])
      expect(await pushed(work)).toBe(1)
    } finally {
      fs.rmSync(path.dirname(outside), { recursive: true, force: true })
    }
  }, 240_000)

  it("refuses a checkout on a network file system, and says why", async () => {
    const work = tempDir("wn")
    await ok(["init", "--name", "wn"], at(alice, work))
    // The daemon sees NFS's statfs type (0x6969): writes from other machines would make no event there.
    const run = await grove(["watch", "start", "--json"], { ...at(alice, work), env: { ...alice.env!, GROVE_WATCH_TEST_STATFS_TYPE: String(0x6969) } })
    expect(run.code).toBe(1)
    expect(run.stdout + run.stderr).toContain("nfs file system")
    expect(json(await ok(["watch", "status", "--json"], at(alice, work)))).toMatchObject({ running: false })
  }, 120_000)

  it("answers push and status without loading node:crypto or node:fs/promises (the bundle's quick path)", async () => {
    if (!fs.existsSync(path.join(ROOT, "packages/cli/dist/noop-push.mjs"))) return
    const { work } = await watched("wb")
    const env = { ...alice.env!, GROVE_BUNDLE: "1", NODE_OPTIONS: `--import ${REPORT_BUILTINS}` }
    // The first look keeps a token (a file written), the next ones are quiet; a status of an unchanged tree too.
    for (const args of [["push", "--json"], ["push", "--json"], ["status", "--json"]]) {
      const run = await ok(args, { ...at(alice, work), env })
      const names = builtinsOf(run.stderr)
      expect(names).toContain("net") // the daemon was asked
      expect({ args, loaded: names.filter((n) => n === "crypto" || n === "fs/promises") }).toEqual({ args, loaded: [] })
    }
    expect(fs.existsSync(tokenFile(work))).toBe(true)
  }, 240_000)

  it("stops, and says so", async () => {
    // The daemon lives for hours: the caller's secrets stay out of its environment.
    const { pid, work } = await watched("ws", { SERVICE_API_KEY: "do-not-keep", GROVE_TOKEN: "do-not-keep" })
    expect(fs.readFileSync(`/proc/${pid}/environ`, "utf8")).not.toContain("do-not-keep")
    expect(json(await ok(["watch", "status", "--json"], at(alice, work)))).toMatchObject({ running: true, pid })
    expect(json(await ok(["watch", "stop", "--json"], at(alice, work)))).toMatchObject({ stopped: true })
    for (let i = 0; i < 250 && alive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(alive(pid)).toBe(false)
    expect(fs.existsSync(path.join(work, ".grove/watch/sock"))).toBe(false)
    expect(json(await ok(["watch", "stop", "--json"], at(alice, work)))).toMatchObject({ stopped: false })
    expect(await grove(["watch", "status"], at(alice, path.dirname(work)))).toMatchObject({ code: 1 })
  }, 120_000)
})
