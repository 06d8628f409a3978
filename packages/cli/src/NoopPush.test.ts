import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer } from "effect"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { captureConsole, envLayer, scriptedInteraction, tempDir } from "../test/support.ts"
import { run } from "./Cli.ts"
import { initialState, newBranch } from "./local/State.ts"
import type { BranchState, RepoState } from "./local/State.ts"
import { indexColumns, indexPath, readIndexSync, serializeIndex } from "./local/TreeStatus.ts"
import { readIndex, scan, writeIndex } from "./local/WorkingTree.ts"
import { noopPush, quickStatus } from "./NoopPush.ts"

const HEAD = "a".repeat(64)

const writeJson = (file: string, value: unknown) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, JSON.stringify(value))
}

/** A pushed, clean checkout: branch at HEAD on the server, index based on HEAD, files older than the index. */
const checkout = (
  branch: Partial<BranchState> = {},
  extra: Partial<RepoState> = {},
  config: Record<string, unknown> = { remote: "http://127.0.0.1:9", owner: "o", name: "n" },
  /** More files, in `many/<0-49>/` (`a.txt` and `sub/b.txt` always). */
  more = 0
) =>
  Effect.gen(function*() {
    const root = yield* tempDir("noop")
    writeJson(path.join(root, ".grove/config.json"), config)
    const state: RepoState = { ...initialState("u", newBranch("u-abcdef", { remote_head: HEAD, head: HEAD, ...branch })), ...extra }
    writeJson(path.join(root, ".grove/state.json"), state)
    const past = Date.now() / 1000 - 3600
    const files = ["a.txt", "sub/b.txt", ...Array.from({ length: more }, (_, i) => `many/${i % 50}/${i}.txt`)]
    for (const file of files) {
      fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
      fs.writeFileSync(path.join(root, file), file)
      fs.utimesSync(path.join(root, file), past, past)
    }
    // Settled directories: the index records them, so an unchanged tree is told from its columns.
    const dirs = [...new Set(files.map((file) => path.dirname(path.join(root, file))))].sort().reverse()
    for (const dir of [...dirs.filter((dir) => dir !== root), ...(more > 0 ? [path.join(root, "many")] : []), root]) fs.utimesSync(dir, past, past)
    // (utimes sets their ctime to now: the index must be written a clock tick later, with them taken as settled. The
    // index's own mtime bounds its written_at, and the file system may hand the next file the very time it gave
    // their ctime (a coarse tick, or multigrain timestamps' floor): wait until a file written now gets a later time
    // than theirs, and Date.now() (whole ms) has passed it too.)
    const changedAt = fs.statSync(root).ctimeMs
    const clock = path.join(root, ".grove/clock")
    do fs.writeFileSync(clock, ""); while (fs.statSync(clock).mtimeMs <= changedAt || Date.now() <= changedAt + 1)
    fs.rmSync(clock)
    const scanned = yield* scan(root, yield* readIndex(root), Date.now())
    yield* writeIndex(root, scanned.files, HEAD, undefined, scanned.folders)
    // A small push (SmallPush.ts) answers a promise: awaited either way.
    const ask = (args: ReadonlyArray<string> = ["push"], cwd = path.join(root, "sub")) =>
      Effect.promise(async () => noopPush({ args, env: {}, cwd, home: "/nonexistent-home" }))
    const askStatus = (args: ReadonlyArray<string>) => quickStatus({ args, env: {}, cwd: path.join(root, "sub"), home: "/nonexistent-home" })
    return { root, ask, askStatus }
  })

describe("NoopPush", () => {
  it.effect("answers a clean, pushed checkout from any directory inside it, as text or JSON", () =>
    Effect.gen(function*() {
      const { ask } = yield* checkout()
      expect(yield* ask()).toBe("Already up to date (u-abcdef).")
      expect(JSON.parse((yield* ask(["push", "--json"]))!)).toEqual({
        branch: "u-abcdef",
        head: HEAD,
        pushed_commits: 0,
        uploaded_chunks: 0,
        uploaded_bytes: 0,
        sent_bytes: 0,
        created_repository: false
      })
    }).pipe(Effect.scoped))

  it.effect("leaves every other case to the full command", () =>
    Effect.gen(function*() {
      const cases: Array<[string, Partial<BranchState>, Partial<RepoState>]> = [
        ["unpushed commits", { unpushed: [HEAD] }, {}],
        ["description pending", { description_pending: true }, {}],
        ["close pending", { close_pending: true }, {}],
        ["never pushed", { remote_head: null }, {}],
        ["head moved", { head: "b".repeat(64) }, {}],
        ["merge in progress", {}, { merge: { branch: "u-abcdef", parent: HEAD, merge_parent: HEAD, conflicts: [] } }],
        ["on main", { name: "main" }, { branch: "main", branches: {} }]
      ]
      for (const [label, branch, extra] of cases) {
        const fixed = extra.branches === undefined ? extra : { ...extra, branches: { main: newBranch("main", { remote_head: HEAD, head: HEAD }) } }
        const { ask } = yield* checkout(branch, fixed)
        expect({ label, answer: yield* ask() }).toEqual({ label, answer: undefined })
      }
      const { ask, root } = yield* checkout()
      expect(yield* ask(["push", "--remote", "http://x"])).toBeUndefined()
      expect(yield* ask(["pull"])).toBeUndefined()
      expect(yield* Effect.promise(async () => noopPush({ args: ["push"], env: { GROVE_REMOTE: "ftp://nope" }, cwd: root, home: "/x" }))).toBeUndefined()
      expect(yield* ask(["push"], path.dirname(root))).toBeUndefined() // not in a checkout
      fs.writeFileSync(path.join(root, "sub/new.txt"), "new")
      expect(yield* ask()).toBeUndefined()
    }).pipe(Effect.scoped))

  it.effect("a same-size change in the clock tick the index was written in is not answered as up to date (racy git)", () =>
    Effect.gen(function*() {
      const { ask, root } = yield* checkout()
      const file = path.join(root, "a.txt")
      // Changed unseen: same size, and the index's entry carries the changed file's exact stat with the old hash.
      fs.writeFileSync(file, "A.TXT")
      const stats = fs.lstatSync(file)
      const files = new Map(readIndexSync(root).files)
      files.set("a.txt", { ...files.get("a.txt")!, size: stats.size, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino })
      const writeAt = (writtenAt: number) => {
        // As the client writes it: a new file renamed into place (a read is cached by inode and mtime).
        fs.writeFileSync(`${indexPath(root)}.new`, serializeIndex(files, HEAD, new Map(), writtenAt))
        const later = stats.mtimeMs / 1000 + 3600 // the index file's own mtime is not the earlier of the two
        fs.utimesSync(`${indexPath(root)}.new`, later, later)
        fs.renameSync(`${indexPath(root)}.new`, indexPath(root))
      }
      // Index written in the same tick as the change: the entry is racily clean, so the full command decides.
      writeAt(stats.mtimeMs)
      expect(yield* ask()).toBeUndefined()
      // The same entry in an index written a tick later is trusted: the racy rule, not luck, caught it above.
      writeAt(stats.mtimeMs + 1)
      expect(yield* ask()).toBe("Already up to date (u-abcdef).")
    }).pipe(Effect.scoped))

  it.effect("a check of many files runs without TurboFan, gives it back after, and leaves the process in its directory", () =>
    Effect.gen(function*() {
      const { root } = yield* checkout({}, {}, undefined, 6_000)
      // In a node of its own, V8's compiles traced: none by TurboFan while the check runs (before: the stat loop's, 20k
      // files ~10 ms of CPU); a hot function after it is marked for TurboFan again.
      const script = `
        const { noopPush } = await import(process.env.NOOP_MODULE)
        const cwd = process.cwd()
        const ask = async (tag) => {
          console.log("check begins")
          const answer = await noopPush({ args: ["push"], env: {}, cwd: process.env.NOOP_ROOT, home: "/nonexistent-home" })
          console.log("check ends " + JSON.stringify({ tag, answer, cwd: process.cwd() === cwd }))
        }
        await ask("clean")
        const hot = (n) => { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s }
        for (let i = 0; i < 20000; i++) hot(100)
        console.log("hot ends")
        require("node:fs").appendFileSync(process.env.NOOP_ROOT + "/many/7/5007.txt", "!")
        await ask("changed")
      `
      const out = execFileSync(process.execPath, ["--trace-opt", "--input-type=module", "-e", script.replace("require(", "process.getBuiltinModule(")], {
        env: { ...process.env, NOOP_MODULE: new URL("./NoopPush.ts", import.meta.url).href, NOOP_ROOT: root },
        cwd: path.dirname(root),
        encoding: "utf8",
        maxBuffer: 64 * 1024 * 1024
      })
      // Only compiles begun while a check runs count: `hot`'s compile, begun before the second check, may finish on
      // the background thread during it at load ("completed compiling/optimizing" lines), which is not the check's.
      const checks = out.split("check begins").slice(1).map((part) => part.slice(0, part.indexOf("check ends")))
      expect(checks.map((during) => during.match(/^\[(marking|compiling method) .*TURBOFAN/gm)?.length ?? 0)).toEqual([0, 0])
      const answers = [...out.matchAll(/check ends (.*)/g)].map((m) => JSON.parse(m[1]!))
      expect(answers).toEqual([
        { tag: "clean", answer: "Already up to date (u-abcdef).", cwd: true },
        { tag: "changed", cwd: true }
      ])
      const after = out.slice(out.indexOf("check ends"), out.indexOf("hot ends"))
      expect(after).toMatch(/JSFunction hot .*TURBOFAN/)
    }).pipe(Effect.scoped), 120_000)

  it.effect("the bin ends the process once a quick answer is written, never before anything still pending", () =>
    Effect.gen(function*() {
      const { root } = yield* checkout()
      const bin = fileURLToPath(new URL("../bin/grove.js", import.meta.url))
      // A module loaded first: a listener for the natural end (after the event loop's last turn), or work still pending.
      const grove = (first: string) =>
        spawnSync(process.execPath, ["--import", `data:text/javascript,${encodeURIComponent(first)}`, bin, "push"], {
          cwd: root,
          env: { PATH: process.env["PATH"], HOME: "/nonexistent-home" },
          encoding: "utf8"
        })
      const idle = grove(`process.on("beforeExit", () => process.stderr.write("natural end\\n"))`)
      expect({ status: idle.status, stdout: idle.stdout, stderr: idle.stderr }).toEqual({ status: 0, stdout: "Already up to date (u-abcdef).\n", stderr: "" })
      const pending = grove(`setTimeout(() => process.stderr.write("pending ran\\n"), 300)`)
      expect({ status: pending.status, stdout: pending.stdout, stderr: pending.stderr })
        .toEqual({ status: 0, stdout: "Already up to date (u-abcdef).\n", stderr: "pending ran\n" })
    }).pipe(Effect.scoped))

  it.effect("never answers for the checkout above a clone that did not finish (.grove without config.json)", () =>
    Effect.gen(function*() {
      const { ask, askStatus, root } = yield* checkout()
      // Killed before any file was in place: the outer tree's walk skips .grove, so it holds no file it lacks.
      const dest = path.join(root, "sub/dest")
      fs.mkdirSync(path.join(dest, ".grove"), { recursive: true })
      expect(yield* ask()).toBe("Already up to date (u-abcdef).") // from the outer checkout's own folder
      expect(yield* ask(["push"], dest)).toBeUndefined()
      expect(quickStatus({ args: ["status"], env: {}, cwd: dest, home: "/nonexistent-home" })).toBeUndefined()
      expect(yield* Effect.promise(async () => askStatus(["status"]))).toBeUndefined() // the outer tree has a new folder
    }).pipe(Effect.scoped))

  it.effect("an index based on another commit, or none, is not trusted", () =>
    Effect.gen(function*() {
      const { ask, root } = yield* checkout()
      const scanned = yield* scan(root, yield* readIndex(root))
      yield* writeIndex(root, scanned.files, "c".repeat(64))
      expect(yield* ask()).toBeUndefined()
      yield* writeIndex(root, scanned.files, null)
      expect(yield* ask()).toBeUndefined()
      fs.rmSync(path.join(root, ".grove/index.json"))
      expect(yield* ask()).toBeUndefined()
    }).pipe(Effect.scoped))
})

/** `grove status` through the full command tree (in-process), as stdout prints it. */
const fullStatus = (root: string, json: boolean) =>
  Effect.gen(function*() {
    const captured = captureConsole()
    const exitCode = yield* run(json ? ["status", "--json"] : ["status"]).pipe(
      Effect.provide(Layer.merge(envLayer({ home: "/nonexistent-home", cwd: path.join(root, "sub") }), scriptedInteraction(false).layer)),
      Effect.provideService(Console.Console, captured.console)
    )
    expect(captured.stderr).toEqual([])
    return { exitCode, stdout: captured.stdout.join("\n") }
  })

describe("quickStatus", () => {
  it.effect("answers an unchanged tree exactly as the full command does, as text and JSON", () =>
    Effect.gen(function*() {
      const cases: Array<[string, Partial<BranchState>, Record<string, unknown> | undefined]> = [
        ["pushed", {}, undefined],
        ["unpushed commits, a description, closed", { unpushed: [HEAD], remote_head: "b".repeat(64), description: "why", status: "closed" }, undefined],
        ["never pushed, no owner yet", { remote_head: null, parent_branch: null }, { remote: "http://127.0.0.1:9" }],
        ["on main", { name: "main" }, undefined]
      ]
      for (const [label, branch, config] of cases) {
        const extra = branch.name === "main" ? { branch: "main", branches: { main: newBranch("main", { remote_head: HEAD, head: HEAD }) } } : {}
        const { askStatus: ask, root } = yield* checkout(branch, extra, config)
        const recorded = fs.readFileSync(indexPath(root))
        for (const json of [true, false]) {
          const quick = ask(json ? ["status", "--json"] : ["status"])
          expect(quick, label).toBeDefined()
          expect({ label, quick }).toEqual({ label, quick: (yield* fullStatus(root, json)).stdout })
        }
        // The full command found nothing to record either: the index is as it was.
        expect(fs.readFileSync(indexPath(root))).toEqual(recorded)
      }
      const { askStatus: ask } = yield* checkout()
      expect(JSON.parse(ask(["status", "--json"]) as string)).toMatchObject({ repository: "o/n", head: HEAD, changes: [], invalid_paths: [] })
    }).pipe(Effect.scoped))

  it.effect("answers changed files of the index (bytes, same size, mode) exactly as the full command does, index untouched", () =>
    Effect.gen(function*() {
      const { askStatus: ask, root } = yield* checkout({}, {}, undefined, 120)
      fs.writeFileSync(path.join(root, "a.txt"), "A.txt") // the same size
      fs.appendFileSync(path.join(root, "many/7/57.txt"), " and more")
      fs.chmodSync(path.join(root, "sub/b.txt"), 0o755)
      const recorded = fs.readFileSync(indexPath(root))
      for (const json of [true, false]) {
        const quick = yield* Effect.promise(async () => ask(json ? ["status", "--json"] : ["status"]))
        expect(quick).toBeDefined()
        expect(quick).toEqual((yield* fullStatus(root, json)).stdout)
      }
      expect(JSON.parse((yield* Effect.promise(async () => ask(["status", "--json"]))) as string).changes).toEqual([
        { path: "a.txt", change_type: "modified" },
        { path: "many/7/57.txt", change_type: "modified" },
        { path: "sub/b.txt", change_type: "modified" }
      ])
      // Neither wrote the index: it holds the head, and the changes are found again next time.
      expect(fs.readFileSync(indexPath(root))).toEqual(recorded)
    }).pipe(Effect.scoped))

  it("loads no Effect for it: the changed files are hashed and compared by core's Effect-free modules", () => {
    // Every module the quick status path loads, as Node resolves it (module.registerHooks).
    const script = `const urls = [];
(await import("node:module")).registerHooks({ resolve: (s, c, next) => { const r = next(s, c); urls.push(r.url); return r } })
await import(${JSON.stringify(path.join(import.meta.dirname, "NoopPush.ts"))})
await import(${JSON.stringify(path.join(import.meta.dirname, "local/EditedFiles.ts"))})
console.log(JSON.stringify(urls))`
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" })
    expect(child.stderr).toBe("")
    const urls = JSON.parse(child.stdout) as Array<string>
    expect(urls.some((url) => url.endsWith("/core/src/objects/Blake3Backend.ts"))).toBe(true)
    expect(urls.filter((url) => /\/node_modules\/effect\/|\/core\/src\/objects\/Blake3\.ts$/.test(url))).toEqual([])
  })

  it.effect("a tree with a touched file: the quick check's stats go to the full command's scan, which stats no file again", () =>
    Effect.gen(function*() {
      const { askStatus: ask, root } = yield* checkout({}, {}, undefined, 300)
      // The last file the check comes to: the quick check stats every file before it finds the change. Its bytes are
      // the same: the quick answer leaves it to the full command, which records its new stat.
      const last = indexColumns(readIndexSync(root))!.paths.at(-1)!
      fs.utimesSync(path.join(root, last), new Date(), new Date())
      // Every lstat, fs.lstatSync's included, goes through Node's binding: counted there, by file of the checkout (the
      // quick check stats from the checkout's root, the scan by absolute path; the rest is the root itself and modules).
      const binding = (process as unknown as { binding: (name: string) => { lstat: (...args: Array<unknown>) => unknown } }).binding("fs")
      const lstat = binding.lstat
      const lstats = new Map<string, number>()
      const count = (at: unknown) => {
        const file = String(at).replace(`${root}/`, "").replace(/^\.\//, "")
        if (!file.startsWith("/") && file !== ".") lstats.set(file, (lstats.get(file) ?? 0) + 1)
      }
      const changes = yield* Effect.gen(function*() {
        binding.lstat = (...args) => (count(args[0]), lstat.apply(binding, args))
        expect(yield* Effect.promise(async () => ask(["status", "--json"]))).toBeUndefined()
        return JSON.parse((yield* fullStatus(root, true)).stdout).changes
      }).pipe(Effect.ensuring(Effect.sync(() => (binding.lstat = lstat))))
      expect(changes).toEqual([])
      // Each of the 302 files once, the touched one twice more to be hashed, by the quick answer and by the scan
      // (before: the quick check's pass, then the scan's, which stopped at the change, then its walk's).
      expect(lstats.size).toBe(302)
      expect(Object.fromEntries([...lstats].filter(([, n]) => n !== 1))).toEqual({ [last]: 3 })
    }).pipe(Effect.scoped))

  it.effect("leaves an added file, a merge, withheld files, other flags and an index it cannot trust to the full command", () =>
    Effect.gen(function*() {
      const status = ["status", "--json"]
      const merging = yield* checkout({}, { merge: { branch: "u-abcdef", parent: HEAD, merge_parent: HEAD, conflicts: [] } })
      expect(merging.askStatus(status)).toBeUndefined()
      const { askStatus: ask, root } = yield* checkout()
      expect(ask(status)).toBeDefined()
      expect(ask(["status", "--remote", "http://x"])).toBeUndefined()
      expect(quickStatus({ args: status, env: { GROVE_REMOTE: "ftp://nope" }, cwd: root, home: "/x" })).toBeUndefined()
      fs.writeFileSync(path.join(root, ".grove/withheld.json"), "[]")
      expect(ask(status)).toBeUndefined()
      fs.rmSync(path.join(root, ".grove/withheld.json"))
      // Another base, then a tree with a new file: the full command lists the change.
      const scanned = yield* scan(root, yield* readIndex(root))
      yield* writeIndex(root, scanned.files, "c".repeat(64))
      expect(ask(status)).toBeUndefined()
      yield* writeIndex(root, scanned.files, HEAD, undefined, scanned.folders)
      expect(ask(status)).toBeDefined()
      fs.writeFileSync(path.join(root, "sub/new.txt"), "new")
      expect(ask(status)).toBeUndefined()
      expect(JSON.parse((yield* fullStatus(root, true)).stdout).changes).toEqual([{ path: "sub/new.txt", change_type: "added" }])
    }).pipe(Effect.scoped))
})
