import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import { BINDING_NODE_MAJOR, CTIME_MS, INO, isDirectory, isSymbolicLink, lstatRow, MODE, MTIME_MS, NLINK, SIZE, statRow } from "./StatValues.ts"

const fields = (s: fs.Stats) => [s.mode, s.nlink, s.ino, s.size, s.mtimeMs, s.ctimeMs]
const rowFields = (r: Float64Array | undefined) => r === undefined ? undefined : [MODE, NLINK, INO, SIZE, MTIME_MS, CTIME_MS].map((k) => r[k])

/** A file, an executable, a hard-linked file, a symlink to each kind, a dangling symlink, a directory. */
const tree = Effect.gen(function*() {
  const root = yield* tempDir("stat-values")
  fs.mkdirSync(path.join(root, "dir/deeper"), { recursive: true })
  fs.writeFileSync(path.join(root, "dir/a.txt"), "alpha")
  fs.writeFileSync(path.join(root, "run.sh"), "#!/bin/sh\n", { mode: 0o755 })
  fs.linkSync(path.join(root, "dir/a.txt"), path.join(root, "hard.txt"))
  fs.symlinkSync("dir/a.txt", path.join(root, "to-file"))
  fs.symlinkSync("dir", path.join(root, "to-dir"))
  fs.symlinkSync("nowhere", path.join(root, "dangling"))
  const names = ["dir", "dir/deeper", "dir/a.txt", "run.sh", "hard.txt", "to-file", "to-dir", "dangling"]
  return { root, paths: [root, ...names.map((name) => path.join(root, name))] }
})

/** Counts calls to `fs[name]` (through the builtin module, which the ESM namespace mirrors) while `run` runs. */
const countingFs = <A>(name: "lstatSync" | "statSync", run: () => A): { result: A; calls: number } => {
  const cjs = createRequire(import.meta.url)("node:fs") as Record<typeof name, (...args: Array<unknown>) => unknown>
  const original = cjs[name]
  let calls = 0
  cjs[name] = (...args) => (calls++, original(...args))
  syncBuiltinESMExports()
  try {
    return { result: run(), calls }
  } finally {
    cjs[name] = original
    syncBuiltinESMExports()
  }
}

describe("StatValues", () => {
  it.effect("answers as fs.lstatSync and fs.statSync do: files, modes, hard links, symlinks, directories, nothing", () =>
    Effect.gen(function*() {
      const { paths, root } = yield* tree
      for (const file of paths) {
        expect({ file, row: rowFields(lstatRow(file)) }).toEqual({ file, row: fields(fs.lstatSync(file)) })
        const followed = fs.statSync(file, { throwIfNoEntry: false })
        expect({ file, row: rowFields(statRow(file)) }).toEqual({ file, row: followed && fields(followed) })
      }
      expect(isSymbolicLink(lstatRow(path.join(root, "to-dir"))!)).toBe(true)
      expect(isDirectory(statRow(path.join(root, "to-dir"))!)).toBe(true)
      expect(isDirectory(lstatRow(path.join(root, "dir/a.txt"))!)).toBe(false)
      expect(lstatRow(path.join(root, "missing"))).toBeUndefined()
      expect(statRow(path.join(root, "missing/below"))).toBeUndefined()
      expect(() => lstatRow(path.join(root, "dir/a.txt/below"))).toThrow(/ENOTDIR/) // only a missing path is no answer
    }).pipe(Effect.scoped))

  it.effect("once checked, stats without fs.lstatSync or fs.statSync (no Stats object per call)", () =>
    Effect.gen(function*() {
      const { paths } = yield* tree
      lstatRow(paths[0]!)
      expect(countingFs("lstatSync", () => paths.map(lstatRow).length).calls).toBe(0)
      expect(countingFs("statSync", () => paths.map(statRow).length).calls).toBe(0)
    }).pipe(Effect.scoped))

  it.effect("a path with a NUL byte is refused as fs refuses it, not stat-ed up to the NUL", () =>
    Effect.gen(function*() {
      const { paths, root } = yield* tree
      lstatRow(paths[0]!)
      const file = path.join(root, "dir/a.txt")
      for (const odd of [`${file}\0`, `${file}\0zz`, `\0${file}`]) {
        expect(() => lstatRow(odd)).toThrow(expect.objectContaining({ code: "ERR_INVALID_ARG_VALUE" }))
        expect(() => statRow(odd)).toThrow(expect.objectContaining({ code: "ERR_INVALID_ARG_VALUE" }))
      }
      expect(rowFields(lstatRow(file))).toEqual(fields(fs.lstatSync(file)))
    }).pipe(Effect.scoped))

  it.effect("where taking the binding warns, or on another Node major: the same answers, through fs, silently", () =>
    Effect.gen(function*() {
      const { paths, root } = yield* tree
      // Counts the binding's stat calls; `warn` makes process.binding("fs") warn as a runtime-deprecated binding does
      // in Node (runtimeDeprecatedList), `major` makes the process claim another Node version.
      const preload = path.join(root, "preload.mjs")
      fs.writeFileSync(
        preload,
        `const real = process.binding
let calls = 0
globalThis.bindingCalls = () => calls
process.binding = function binding(name) {
  const b = real.call(process, name)
  if (name !== "fs") return b
  if (process.env.W_WARN) process.emitWarning("Access to process.binding('fs') is deprecated.", "DeprecationWarning", "DEP0111")
  return new Proxy(b, { get: (t, k) => typeof t[k] === "function" && (k === "lstat" || k === "stat") ? (...a) => (calls++, t[k](...a)) : t[k] })
}
if (process.env.W_MAJOR) {
  Object.defineProperty(process, "versions", { value: { ...process.versions, node: process.env.W_MAJOR + ".0.0" } })
}
`
      )
      const script = `const m = await import(${JSON.stringify(path.join(import.meta.dirname, "StatValues.ts"))})
const rows = JSON.parse(process.argv[1]).map((p) => Array.from(m.lstatRow(p)))
console.log(JSON.stringify({ rows, bindingCalls: globalThis.bindingCalls() }))`
      const run = (flags: ReadonlyArray<string>, env: Record<string, string>) => {
        const child = spawnSync(process.execPath, [...flags, "--import", preload, "--input-type=module", "-e", script, JSON.stringify(paths)], {
          env: { ...process.env, ...env },
          encoding: "utf8"
        })
        return { flags, env, status: child.status, stderr: child.stderr, ...(child.status === 0 ? JSON.parse(child.stdout) : {}) }
      }
      const rows = paths.map((p) => fields(fs.lstatSync(p)))
      const ways: Array<[ReadonlyArray<string>, Record<string, string>]> = [
        [["--pending-deprecation"], {}],
        [[], { NODE_OPTIONS: "--pending-deprecation" }],
        [[], { NODE_PENDING_DEPRECATION: "1" }],
        [[], { W_WARN: "1" }],
        [[], { W_MAJOR: String(BINDING_NODE_MAJOR + 2) }],
        [[], { W_MAJOR: String(BINDING_NODE_MAJOR - 1) }]
      ]
      for (const [flags, env] of ways) {
        expect(run(flags, env)).toEqual({ flags, env, status: 0, stderr: "", rows, bindingCalls: 0 })
      }
      // The preload itself leaves the binding in use where nothing warns, on this major.
      expect(run([], {})).toMatchObject({ status: 0, stderr: "", rows })
      expect(run([], {}).bindingCalls).toBeGreaterThan(paths.length)
    }).pipe(Effect.scoped))
})
