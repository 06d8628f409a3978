/**
 * A checkout an older client cloned may track files under a `.grove` below the root (`d/.grove/x`, `D/.GROVE/x`):
 * no tree may hold one now (the server refuses it, the walk skips a `.grove` folder). While such a file is there, the
 * quick answers (NoopPush.ts) leave the checkout to the full commands: status lists it as tracked but reserved (not
 * deleted), push refuses naming it before anything is sent. Moved or removed, it reads as deleted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { captureConsole, envLayer, scriptedInteraction, tempDir } from "../test/support.ts"
import { run } from "./Cli.ts"
import { initialState, newBranch } from "./local/State.ts"
import { readIndex, scan, writeIndex } from "./local/WorkingTree.ts"
import { noopPush, quickStatus } from "./NoopPush.ts"

const HEAD = "a".repeat(64)

const writeJson = (file: string, value: unknown) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, JSON.stringify(value))
}

/** A pushed checkout whose head (as its index records it, settled) tracks `a.txt`, `d/.grove/x` and `D/.GROVE/x`. */
const oldClone = Effect.gen(function*() {
  const root = yield* tempDir("tracked-dotgrove")
  writeJson(path.join(root, ".grove/config.json"), { remote: "http://127.0.0.1:9", owner: "o", name: "n" })
  writeJson(path.join(root, ".grove/state.json"), initialState("u", newBranch("u-abcdef", { remote_head: HEAD, head: HEAD })))
  const past = Date.now() / 1000 - 3600
  const moves = [["d/g", "d/.grove"], ["D/G", "D/.GROVE"]] as const
  for (const file of ["a.txt", "d/g/x", "D/G/x"]) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
    fs.writeFileSync(path.join(root, file), file)
  }
  // The index as the older client wrote it: the scan of the same files at other names, then renamed.
  const scanned = yield* scan(root, yield* readIndex(root), Date.now())
  for (const [from, to] of moves) fs.renameSync(path.join(root, from), path.join(root, to))
  for (const file of ["a.txt", "d/.grove/x", "D/.GROVE/x", "d/.grove", "D/.GROVE", "d", "D", "."]) {
    fs.utimesSync(path.join(root, file), past, past)
  }
  const rename = (file: string) => moves.reduce((at, [from, to]) => at.startsWith(from) ? to + at.slice(from.length) : at, file)
  const files = new Map([...scanned.files].map(([file, e]) => [rename(file), { ...e, ...statOf(path.join(root, rename(file))) }]))
  const folders = new Map([...scanned.folders].map(([dir, f]) => [rename(dir), { ...f, ...dirStatOf(path.join(root, rename(dir))) }]))
  // Written a clock tick after every stat above (utimes sets ctime to now), so all of it is settled.
  yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
  yield* writeIndex(root, files, HEAD, undefined, folders)
  return root
})

const statOf = (file: string) => {
  const s = fs.lstatSync(file)
  return { size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs, ino: s.ino }
}

const dirStatOf = (dir: string) => {
  const s = fs.statSync(dir)
  return { mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs, ino: s.ino }
}

/** A command through the full command tree (in-process). */
const full = (root: string, args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const captured = captureConsole()
    const exitCode = yield* run(args).pipe(
      Effect.provide(Layer.merge(envLayer({ home: "/nonexistent-home", cwd: root }), scriptedInteraction(false).layer)),
      Effect.provideService(Console.Console, captured.console)
    )
    return { exitCode, stdout: captured.stdout.join("\n"), stderr: captured.stderr.join("\n") }
  })

const ask = (root: string, args: ReadonlyArray<string>) => ({ args, env: {}, cwd: root, home: "/nonexistent-home" })

describe("a file tracked under a .grove below the root (an older client's clone)", () => {
  it.effect("status lists it as tracked but reserved, push refuses naming it; removed, it reads as deleted", () =>
    Effect.gen(function*() {
      const root = yield* oldClone
      // No quick answer: the index's columns would tell the tree unchanged.
      expect(quickStatus(ask(root, ["status", "--json"]))).toBeUndefined()
      expect(yield* Effect.promise(async () => noopPush(ask(root, ["push"])))).toBeUndefined()

      const status = JSON.parse((yield* full(root, ["status", "--json"])).stdout)
      expect(status.changes).toEqual([])
      expect(status.invalid_paths.map((i: { path: string }) => i.path).sort()).toEqual(["D/.GROVE/x", "d/.grove/x"])
      expect(status.invalid_paths.find((i: { path: string }) => i.path === "d/.grove/x").reason)
        .toBe("tracked, but 'd/.grove' is taken for '.grove', where grove keeps a checkout's own files: move it out of 'd/.grove'")
      expect((yield* full(root, ["status"])).stdout).toContain("! D/.GROVE/x: tracked, but 'D/.GROVE' is taken for '.grove'")

      // Refused before anything is sent (the remote is a closed port): no 400 from a server, the paths named.
      const pushed = yield* full(root, ["push", "--json"])
      expect(pushed.exitCode).not.toBe(0)
      expect(JSON.parse(pushed.stdout || pushed.stderr)).toMatchObject({ code: "invalid_path" })
      expect(pushed.stdout + pushed.stderr).toContain("d/.grove/x: tracked, but 'd/.grove' is taken")
      expect(pushed.stdout + pushed.stderr).toContain("D/.GROVE/x: tracked, but 'D/.GROVE' is taken")

      fs.rmSync(path.join(root, "d/.grove/x"))
      fs.renameSync(path.join(root, "D/.GROVE/x"), path.join(root, "D/x"))
      const after = JSON.parse((yield* full(root, ["status", "--json"])).stdout)
      expect(after.invalid_paths).toEqual([])
      expect(after.changes).toEqual([
        { path: "D/x", change_type: "renamed", old_path: "D/.GROVE/x" },
        { path: "d/.grove/x", change_type: "deleted" }
      ])
    }).pipe(Effect.scoped))
})
