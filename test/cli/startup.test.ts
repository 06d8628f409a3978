/**
 * The client's start (bin/start.js, src/main.ts): `grove --version` alone is answered without loading
 * the command tree, with the line effect/cli prints; the argument-less content commands run without it (src/Direct.ts); V8's compile cache lives in the user's cache
 * directory, is used by the next run, never runs code older than the file, and a cache directory that
 * cannot be written only costs the cache.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { rewriteBuiltinImports } from "../../scripts/bundle/builtins-by-getter.ts"
import { VERSION_LINE } from "../../packages/cli/src/BuildInfo.ts"
import { CLI_BIN, ROOT } from "../support/GroveServer.ts"
import { builtinsOf, removeTempDirs, REPORT_BUILTINS, tempDir } from "./harness.ts"

afterAll(() => removeTempDirs())

const run = (bin: string, args: ReadonlyArray<string>, env: Record<string, string>, nodeArgs: ReadonlyArray<string> = []) =>
  spawnSync(process.execPath, [...nodeArgs, bin, ...args], {
    encoding: "utf8",
    cwd: tempDir("cwd"),
    env: { HOME: tempDir("home"), PATH: path.dirname(process.execPath), ...env },
    timeout: 60_000
  })

/** Prints every module file the program loads to stderr, as `loaded <path>` (Node's synchronous module hooks). */
const LOG_LOADS = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from "node:module"
registerHooks({ load(url, context, next) { if (url.startsWith("file:")) process.stderr.write("loaded " + new URL(url).pathname + "\\n"); return next(url, context) } })
`)}`

const loaded = (stderr: string) => [...stderr.matchAll(/^loaded (.+)$/gm)].map((m) => m[1]!)

/** LOG_LOADS, and every HTTP request the program starts as `request <method> <path>`, in the order they happen. */
const LOG_LOADS_AND_REQUESTS = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from "node:module"
import { subscribe } from "node:diagnostics_channel"
registerHooks({ load(url, context, next) { if (url.startsWith("file:")) process.stderr.write("loaded " + new URL(url).pathname + "\\n"); return next(url, context) } })
subscribe("http.client.request.start", ({ request }) => process.stderr.write("request " + request.method + " " + request.path + "\\n"))
`)}`

/** A server that answers every request 404, and the requests it got. */
const notFoundServer = async () => {
  const requests: Array<{ readonly path: string; readonly authorization: string | undefined }> = []
  const server = http.createServer((request, response) => {
    requests.push({ path: request.url!, authorization: request.headers.authorization })
    response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: "not found", code: "not_found" }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { requests, server, site: `http://127.0.0.1:${(server.address() as { port: number }).port}` }
}

/** spawnSync's result of a run that does not block this process (a server here answers it). */
const runAsync = (args: ReadonlyArray<string>, env: Record<string, string>, cwd: string, nodeArgs: ReadonlyArray<string>) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, CLI_BIN, ...args], { cwd, env: { PATH: path.dirname(process.execPath), ...env } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.on("error", reject)
    child.on("close", (status) => {
      clearTimeout(timer)
      resolve({ status, stdout, stderr })
    })
  })

// Each case spawns the client 10-20 times, from the bundle and from the sources (transpiled on load): at CI's load
// (15 on 2 cores) one took 92 s, past the 60 s default.
describe("grove's start", { timeout: 300_000 }, () => {
  it("--version alone prints effect/cli's line without loading the command tree, from the bundle and from the sources", () => {
    const bundled = fs.existsSync(path.join(ROOT, "packages/cli/dist/grove.mjs"))
    for (const mode of bundled ? [{ GROVE_BUNDLE: "1" }, { GROVE_NO_BUNDLE: "1" }] : [{ GROVE_NO_BUNDLE: "1" }]) {
      for (const flag of ["--version", "-v"]) {
        const fast = run(CLI_BIN, [flag], mode, ["--import", LOG_LOADS])
        expect({ mode, flag, code: fast.status, stdout: fast.stdout }).toEqual({ mode, flag, code: 0, stdout: `${VERSION_LINE}\n` })
        const files = loaded(fast.stderr)
        expect(files.length).toBeGreaterThan(2) // the hook saw the start
        // Neither effect nor the command tree: a few small files (the bundle's effect chunk alone is ~1 MB).
        expect(files.filter((f) => /\/node_modules\/effect\/|\/src\/Cli\.ts$/.test(f))).toEqual([])
        expect(files.reduce((sum, f) => sum + fs.statSync(f).size, 0)).toBeLessThan(64 * 1024)
      }
      // With any other argument effect/cli answers, with the same line.
      const full = run(CLI_BIN, ["--version", "--json"], mode, ["--import", LOG_LOADS])
      expect({ mode, code: full.status, stdout: full.stdout }).toEqual({ mode, code: 0, stdout: `${VERSION_LINE}\n` })
      expect(loaded(full.stderr).reduce((sum, f) => sum + fs.statSync(f).size, 0)).toBeGreaterThan(64 * 1024)
    }
  })

  it("push, commit, pull and status alone (or with --json) run without the command tree, and load under 2.25 MB of the bundle; with another flag through the tree", () => {
    const bundled = fs.existsSync(path.join(ROOT, "packages/cli/dist/grove.mjs"))
    const tree = (files: ReadonlyArray<string>) => files.filter((f) => /\/src\/Cli\.ts$|\/dist\/chunks\/Cli-[^/]*\.mjs$/.test(f))
    for (const mode of bundled ? [{ GROVE_BUNDLE: "1" }, { GROVE_NO_BUNDLE: "1" }] : [{ GROVE_NO_BUNDLE: "1" }]) {
      for (const args of [["push"], ["commit", "--json"], ["pull"], ["--json", "status"]]) {
        // Outside a checkout: the command's own failure (exit 1), as the tree would answer it.
        const result = run(CLI_BIN, args, mode, ["--import", LOG_LOADS])
        expect({ mode, args, code: result.status, message: /not in a grove checkout/.test(result.stdout + result.stderr) }).toEqual({ mode, args, code: 1, message: true })
        expect({ mode, args, tree: tree(loaded(result.stderr)) }).toEqual({ mode, args, tree: [] })
        // The bundle's code a command loads: effect imported by name is tree-shaken (src/Run.ts); `import("effect")`
        // took its whole namespace, ~0.9 MB more (3.0 MB for a push before, 1.9 MB after).
        if (mode.GROVE_BUNDLE === "1") {
          const bytes = loaded(result.stderr).reduce((sum, f) => sum + fs.statSync(f).size, 0)
          expect({ args, bytes: bytes < 2.25 * 1024 * 1024 }).toEqual({ args, bytes: true })
        }
      }
      const parsed = run(CLI_BIN, ["push", "--remote", "http://127.0.0.1:9"], mode, ["--import", LOG_LOADS])
      expect({ mode, code: parsed.status, tree: tree(loaded(parsed.stderr)).length }).toEqual({ mode, code: 1, tree: 1 })
    }
  })

  it("a plain clone's pull goes out before Effect loads, once, with the server and credential the clone uses; inside a checkout the clone sends it itself", async () => {
    const { requests, server, site } = await notFoundServer()
    const pulls = () => requests.filter((r) => r.path.startsWith("/api/o/n/pull"))
    /** Whether the pull's request started before the first module of effect (the sources) or Run's chunk (the bundle). */
    const pullBeforeEffect = (stderr: string) => {
      const lines = stderr.split("\n")
      const pull = lines.findIndex((l) => l.startsWith("request GET /api/o/n/pull"))
      const effect = lines.findIndex((l) => /^loaded .*(\/node_modules\/effect\/|\/dist\/chunks\/Run-[^/]*\.mjs$)/.test(l))
      expect({ pull: pull >= 0, effect: effect >= 0 }).toEqual({ pull: true, effect: true })
      return pull < effect
    }
    try {
      const bundled = fs.existsSync(path.join(ROOT, "packages/cli/dist/grove.mjs"))
      for (const mode of bundled ? [{ GROVE_BUNDLE: "1" }, { GROVE_NO_BUNDLE: "1" }] : [{ GROVE_NO_BUNDLE: "1" }]) {
        // The service key, the server named by GROVE_REMOTE.
        requests.length = 0
        const keyed = await runAsync(["clone", "o/n", "--json"], { ...mode, HOME: tempDir("home"), SERVICE_API_KEY: "k1", GROVE_REMOTE: site }, tempDir("cwd"), ["--import", LOG_LOADS_AND_REQUESTS])
        expect({ mode, code: keyed.status, early: pullBeforeEffect(keyed.stderr), pulls: pulls() }).toEqual({ mode, code: 1, early: true, pulls: [{ path: "/api/o/n/pull?branch_name=main", authorization: "Bearer k1" }] })
        // No server named: the last one logged in to, with its session's token (a newer session of another server wins).
        requests.length = 0
        const home = tempDir("home")
        fs.mkdirSync(path.join(home, ".grove"), { mode: 0o700 })
        const sessions = {
          "http://127.0.0.1:9": { token: "old", username: "u", created_at: "2026-01-01T00:00:00Z" },
          [site]: { token: "s1", username: "u", created_at: "2026-02-01T00:00:00Z" }
        }
        fs.writeFileSync(path.join(home, ".grove", "credentials"), JSON.stringify(sessions), { mode: 0o600 })
        const session = await runAsync(["clone", "o/n", "d", "--branch", "b"], { ...mode, HOME: home }, tempDir("cwd"), ["--import", LOG_LOADS_AND_REQUESTS])
        expect({ mode, code: session.status, early: pullBeforeEffect(session.stderr), pulls: pulls() }).toEqual({ mode, code: 1, early: true, pulls: [{ path: "/api/o/n/pull?branch_name=b", authorization: "Bearer s1" }] })
        // Inside a checkout of that server its key wins over the session: the clone resolves it, then sends the pull.
        requests.length = 0
        const checkout = tempDir("checkout")
        fs.mkdirSync(path.join(checkout, ".grove"))
        fs.writeFileSync(path.join(checkout, ".grove", "config.json"), JSON.stringify({ remote: site, key: "c1" }))
        const inside = await runAsync(["clone", "o/n"], { ...mode, HOME: home, GROVE_REMOTE: site }, checkout, ["--import", LOG_LOADS_AND_REQUESTS])
        expect({ mode, code: inside.status, early: pullBeforeEffect(inside.stderr), pulls: pulls() }).toEqual({ mode, code: 1, early: false, pulls: [{ path: "/api/o/n/pull?branch_name=main", authorization: "Bearer c1" }] })
      }
    } finally {
      server.close()
    }
  })

  it("a clone loads the definitions of the API groups it calls, not GroveApi's 16 (the sources, where each is a file)", async () => {
    const { server, site } = await notFoundServer()
    try {
      const clone = await runAsync(["clone", "o/n"], { GROVE_NO_BUNDLE: "1", HOME: tempDir("home"), SERVICE_API_KEY: "k1", GROVE_REMOTE: site }, tempDir("cwd"), ["--import", LOG_LOADS])
      expect(clone.status).toBe(1) // not found: it asked the repository (the repos group) after its pull
      const api = loaded(clone.stderr).filter((f) => /\/packages\/api\/src\//.test(f)).map((f) => path.basename(f))
      expect(api).toContain("Groups.ts")
      expect(api.filter((f) => f === "Api.ts" || (f.endsWith("Groups.ts") && f !== "Groups.ts" && f !== "SyncGroups.ts"))).toEqual([])
    } finally {
      server.close()
    }
  })

  it("the bundle's chunks import each other resolved by bin/start.js, not by Node's resolution, and run the same", () => {
    if (!fs.existsSync(path.join(ROOT, "packages/cli/dist/grove.mjs"))) return
    // Hooks registered later run first: this one, registered before start.js's, sees what start.js passes on. It counts
    // the chunks' imports of each other ("./chunk-X.mjs") and the entries' ("./chunks/chunk-X.mjs", "./chunks/Run-X.mjs").
    const seen = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from "node:module"
let chunkImports = 0
registerHooks({ resolve(specifier, context, next) { if (/^\\.\\/(chunks\\/)?[^/]+\\.mjs$/.test(specifier)) chunkImports++; return next(specifier, context) } })
process.on("exit", () => process.stderr.write("chunk imports resolved by node " + chunkImports + "\\n"))
`)}`
    const bundled = run(CLI_BIN, ["clone", "o/n", "--json"], { GROVE_BUNDLE: "1", GROVE_REMOTE: "http://127.0.0.1:9" }, ["--import", seen, "--import", LOG_LOADS])
    expect(bundled.stdout).toMatch(/"code": "network"/) // the clone ran: nothing listens there
    expect(loaded(bundled.stderr).filter((f) => /\/dist\/chunks\/chunk-/.test(f)).length).toBeGreaterThan(10)
    expect(/chunk imports resolved by node (\d+)/.exec(bundled.stderr)?.[1]).toBe("0")
    // `status` outside a checkout: noop-push.mjs and its chunks first (nothing to answer there), then the command.
    const status = run(CLI_BIN, ["status", "--json"], { GROVE_BUNDLE: "1" }, ["--import", seen, "--import", LOG_LOADS])
    expect(loaded(status.stderr).map((f) => path.basename(f))).toContain("noop-push.mjs")
    expect(/chunk imports resolved by node (\d+)/.exec(status.stderr)?.[1]).toBe("0")
    // From the sources nothing is taken over.
    const sources = run(CLI_BIN, ["--version", "--json"], { GROVE_NO_BUNDLE: "1" }, ["--import", seen])
    expect({ code: sources.status, stdout: sources.stdout }).toEqual({ code: 0, stdout: `${VERSION_LINE}\n` })
  })

  it("a command that asks no question and starts no process loads neither node:readline nor node:child_process", () => {
    const builtins = `data:text/javascript,${encodeURIComponent(`process.on("exit", () => process.stderr.write("builtins " + process.moduleLoadList.filter((m) => m.startsWith("NativeModule ")).map((m) => m.slice(13)).join(" ") + "\\n"))`)}`
    const bundled = fs.existsSync(path.join(ROOT, "packages/cli/dist/grove.mjs"))
    for (const mode of bundled ? [{ GROVE_BUNDLE: "1" }, { GROVE_NO_BUNDLE: "1" }] : [{ GROVE_NO_BUNDLE: "1" }]) {
      for (const args of [["--help"], ["status", "--json"]]) {
        const result = run(CLI_BIN, args, mode, ["--import", builtins])
        const names = (/^builtins (.*)$/m.exec(result.stderr)?.[1] ?? "").split(" ")
        expect(names).toContain("fs") // the hook saw the run
        expect({ mode, args, loaded: names.filter((n) => n === "readline" || n === "child_process") }).toEqual({ mode, args, loaded: [] })
      }
    }
  })

  it("the bundle takes Node's modules by getter, and --version loads neither the streams nor node:net (stdout a pipe)", () => {
    const dist = path.join(ROOT, "packages/cli/dist")
    if (!fs.existsSync(path.join(dist, "grove.mjs"))) return
    // An ES import of a builtin builds its facade, which reads every export: node:fs's load fs/promises and the streams.
    const files = fs.readdirSync(dist, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".mjs"))
    const imports = files.flatMap((f) =>
      [...fs.readFileSync(path.join(dist, f), "utf8").matchAll(/^import\s[^;]*?from\s*"(node:[^"]+)";?\s*$/gm)].map((m) => `${f}: ${m[1]}`)
    )
    expect(files.length).toBeGreaterThan(3)
    expect(imports).toEqual([])
    const result = run(CLI_BIN, ["--version"], { GROVE_BUNDLE: "1" }, ["--import", REPORT_BUILTINS])
    expect({ code: result.status, stdout: result.stdout }).toEqual({ code: 0, stdout: `${VERSION_LINE}\n` })
    const names = builtinsOf(result.stderr)
    expect(names).toContain("fs") // the hook saw the run
    expect(names.filter((n) => ["stream", "net", "tty", "fs/promises", "crypto"].includes(n))).toEqual([])
  })

  it("the bundle's builtin imports become getters at the top, in every shape esbuild prints (minified too); any other leaves the file as built", () => {
    const banner = "import { createRequire as r } from \"node:module\"; const require = r(import.meta.url);"
    const text = [
      banner,
      "import { a } from \"./chunk.mjs\";",
      "init();",
      "import * as fs from \"node:fs\";",
      "import {\n  randomBytes,\n  createHash as createHash2\n} from \"node:crypto\";",
      "import os, { homedir } from \"os\";",
      "import path from \"node:path\";",
      "var x = fs.readFileSync;"
    ].join("\n")
    expect(rewriteBuiltinImports(text, 4)).toBe([
      banner,
      "const fs = process.getBuiltinModule(\"node:fs\");",
      "const { randomBytes, createHash: createHash2 } = process.getBuiltinModule(\"node:crypto\");",
      "const os = process.getBuiltinModule(\"os\");",
      "const { homedir } = process.getBuiltinModule(\"os\");",
      "const path = process.getBuiltinModule(\"node:path\");",
      "import { a } from \"./chunk.mjs\";",
      "init();",
      "",
      "",
      "",
      "",
      "var x = fs.readFileSync;"
    ].join("\n"))
    // Fewer imports found than esbuild's metafile counts (a shape not matched here), or one not understood: as built.
    expect(rewriteBuiltinImports(text, 5)).toBeUndefined()
    expect(rewriteBuiltinImports(`${banner}\nimport { a as b as c } from "node:fs";`, 1)).toBeUndefined()
    // Minified (the server's bundle): one import after another on a line, some after code; the banner's own stays.
    const minified = `${banner}\nimport{k as l}from"./chunk.mjs";import*as u from"node:net";var a=1;import{Readable as S,pipeline as p}from"node:stream";import o from"os";a(u,S,p,o);`
    expect(rewriteBuiltinImports(minified, 3)).toBe([
      banner,
      "const u = process.getBuiltinModule(\"node:net\");",
      "const { Readable: S, pipeline: p } = process.getBuiltinModule(\"node:stream\");",
      "const o = process.getBuiltinModule(\"os\");",
      "import{k as l}from\"./chunk.mjs\";var a=1;a(u,S,p,o);"
    ].join("\n"))
    expect(rewriteBuiltinImports(minified, 4)).toBeUndefined()
  })

  it("a client outside a git checkout of its sources runs its bundle without walking them; in one, an edited source wins", () => {
    const root = tempDir("installed")
    const cli = path.join(root, "packages/cli")
    fs.cpSync(path.join(ROOT, "packages/cli/bin"), path.join(cli, "bin"), { recursive: true })
    fs.writeFileSync(path.join(cli, "package.json"), JSON.stringify({ type: "module" }))
    for (const p of ["cli", "api", "core"]) fs.mkdirSync(path.join(root, "packages", p, "src"), { recursive: true })
    fs.writeFileSync(path.join(cli, "src/main.ts"), "console.log(\"sources\")\n")
    fs.mkdirSync(path.join(cli, "dist"))
    fs.writeFileSync(path.join(cli, "dist/grove.mjs"), "console.log(\"bundle\")\n")
    fs.writeFileSync(path.join(cli, "dist/noop-push.mjs"), "export const noopPush = () => undefined\n")
    const OLD = 1_700_000_000 // the bundle older than every source
    for (const f of ["grove.mjs", "noop-push.mjs"]) fs.utimesSync(path.join(cli, "dist", f), OLD, OLD)
    const bin = path.join(cli, "bin/grove.js")
    expect(run(bin, ["log"], {})).toMatchObject({ status: 0, stdout: "bundle\n" })
    fs.rmSync(path.join(root, "packages/core/src"), { recursive: true }) // not even looked at
    expect(run(bin, ["log"], {})).toMatchObject({ status: 0, stdout: "bundle\n" })
    fs.mkdirSync(path.join(root, "packages/core/src"))
    fs.mkdirSync(path.join(root, ".git"))
    expect(run(bin, ["log"], {})).toMatchObject({ status: 0, stdout: "sources\n" })
    expect(run(bin, ["log"], { GROVE_BUNDLE: "1" })).toMatchObject({ status: 0, stdout: "bundle\n" })
  })

  it("the compile cache is kept under $XDG_CACHE_HOME/grove, used by the next run, never stale, and optional", () => {
    // A client of its own (bin/ as shipped, a one-line bundle) so its bundle can be rewritten in place.
    const cli = tempDir("client")
    fs.cpSync(path.join(ROOT, "packages/cli/bin"), path.join(cli, "bin"), { recursive: true })
    fs.writeFileSync(path.join(cli, "package.json"), JSON.stringify({ type: "module" }))
    fs.mkdirSync(path.join(cli, "dist"))
    const bundle = path.join(cli, "dist/grove.mjs")
    fs.writeFileSync(bundle, "console.log(\"one\")\n")
    const MTIME = 1_700_000_000 // whole seconds: set back exactly after the rewrite
    fs.utimesSync(bundle, MTIME, MTIME)
    fs.writeFileSync(path.join(cli, "dist/noop-push.mjs"), "export const noopPush = () => undefined\n")
    const bin = path.join(cli, "bin/grove.js")
    const cache = tempDir("xdg-cache")
    const env = { GROVE_BUNDLE: "1", XDG_CACHE_HOME: cache }

    expect(run(bin, ["status"], env)).toMatchObject({ status: 0, stdout: "one\n", stderr: "" })
    const dir = path.join(cache, "grove/compile-cache")
    const entries = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
    expect(entries.length).toBeGreaterThan(0)
    // The next run takes the bundle's code from it (Node's own report of the cache).
    const again = run(bin, ["status"], { ...env, NODE_DEBUG_NATIVE: "COMPILE_CACHE" })
    expect(again.stdout).toBe("one\n")
    expect(again.stderr).toMatch(/V8 code cache for ESM file:\/\/\S+\/dist\/grove\.mjs was accepted/)

    // Rewritten in place with the same size and mtime (an upgrade a size-and-time key would miss): the new code runs.
    const before = fs.statSync(bundle)
    fs.writeFileSync(bundle, "console.log(\"two\")\n")
    fs.utimesSync(bundle, MTIME, MTIME)
    expect(fs.statSync(bundle)).toMatchObject({ size: before.size, mtimeMs: before.mtimeMs })
    expect(run(bin, ["status"], env)).toMatchObject({ status: 0, stdout: "two\n", stderr: "" })

    // A cache directory that cannot be made (XDG_CACHE_HOME is a file): it runs, says nothing.
    const file = path.join(tempDir("not-a-dir"), "file")
    fs.writeFileSync(file, "")
    expect(run(bin, ["status"], { ...env, XDG_CACHE_HOME: file })).toMatchObject({ status: 0, stdout: "two\n", stderr: "" })
    // One under a file system that answers ENOENT for a directory whose parent exists (procfs): Node's recursive
    // mkdir retried it for ever. It runs, says nothing, and ends.
    expect(run(bin, ["status"], { ...env, XDG_CACHE_HOME: "/proc/no-such-cache" })).toMatchObject({ status: 0, stdout: "two\n", stderr: "" })
    // A relative XDG_CACHE_HOME is ignored (the XDG rule): ~/.cache then.
    const home = tempDir("home")
    expect(run(bin, ["status"], { ...env, XDG_CACHE_HOME: "relative", HOME: home })).toMatchObject({ status: 0, stdout: "two\n" })
    expect(fs.existsSync(path.join(home, ".cache/grove/compile-cache"))).toBe(true)
  })
})
