import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import { CTIME_MS, INO, isDirectory, isSymbolicLink, lstatRow, MODE, MTIME_MS, NLINK, SIZE, statRow } from "./StatValues.ts"

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

  it.effect("under --pending-deprecation (where Node would warn of process.binding): the same answers, through fs, silently", () =>
    Effect.gen(function*() {
      const { paths } = yield* tree
      const script = `const m = await import(${JSON.stringify(path.join(import.meta.dirname, "StatValues.ts"))})
console.log(JSON.stringify(JSON.parse(process.argv[1]).map((p) => Array.from(m.lstatRow(p)))))`
      const ways: Array<[ReadonlyArray<string>, Record<string, string>]> = [
        [["--pending-deprecation"], {}],
        [[], { NODE_OPTIONS: "--pending-deprecation" }],
        [[], { NODE_PENDING_DEPRECATION: "1" }]
      ]
      for (const [flags, env] of ways) {
        const child = spawnSync(process.execPath, [...flags, "--input-type=module", "-e", script, JSON.stringify(paths)], {
          env: { ...process.env, ...env },
          encoding: "utf8"
        })
        expect({ flags, env, status: child.status, stderr: child.stderr }).toEqual({ flags, env, status: 0, stderr: "" })
        expect(JSON.parse(child.stdout)).toEqual(paths.map((p) => fields(fs.lstatSync(p))))
      }
    }).pipe(Effect.scoped))
})
