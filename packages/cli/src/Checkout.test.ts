import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { captureConsole, tempDir } from "../test/support.ts"
import { findCheckout, otherGroveText, unfinishedCloneText } from "./Checkout.ts"
import { indexPath, serializeIndex } from "./local/IndexFile.ts"

describe("findCheckout", () => {
  it.effect("stops at a clone that did not finish (.grove without config.json) inside another checkout, and says so", () =>
    Effect.gen(function*() {
      const outer = yield* tempDir("checkout")
      fs.mkdirSync(path.join(outer, ".grove"))
      fs.writeFileSync(path.join(outer, ".grove/config.json"), JSON.stringify({ remote: "http://127.0.0.1:9" }))
      // A clone killed (kill -9) before it wrote its config, last: some files in place, no config.
      const dest = path.join(outer, "dest")
      fs.mkdirSync(path.join(dest, ".grove/objects"), { recursive: true })
      fs.mkdirSync(path.join(dest, "src"))
      fs.writeFileSync(path.join(dest, "src/a.txt"), "a")
      const find = (cwd: string) =>
        Effect.gen(function*() {
          const captured = captureConsole()
          const found = yield* findCheckout(cwd, "/nonexistent-home").pipe(Effect.provideService(Console.Console, captured.console))
          return { root: Option.getOrUndefined(Option.map(found, (c) => c.root)), stderr: captured.stderr }
        })
      const said = [`warning: ${unfinishedCloneText(dest)}`]
      expect(yield* find(dest)).toEqual({ root: undefined, stderr: said })
      // Once per command: a command looks its checkout up twice (its credential, its workspace).
      expect(yield* find(path.join(dest, "src"))).toEqual({ root: undefined, stderr: [] })
      expect(unfinishedCloneText(dest)).toContain("did not finish")
      // The outer checkout is found from its own folders.
      expect(yield* find(outer)).toEqual({ root: outer, stderr: [] })
      // A .grove holding credentials (a home's, seen under another HOME) is no clone: passed over as before.
      fs.rmSync(path.join(dest, ".grove"), { recursive: true })
      fs.mkdirSync(path.join(dest, ".grove"))
      fs.writeFileSync(path.join(dest, ".grove/credentials"), "{}")
      expect(yield* find(dest)).toEqual({ root: outer, stderr: [] })
    }).pipe(Effect.scoped))

  it.effect("gives the rm -r hint only for a .grove holding what a clone writes", () =>
    Effect.gen(function*() {
      const top = yield* tempDir("checkout")
      const find = (cwd: string) =>
        Effect.gen(function*() {
          const captured = captureConsole()
          const found = yield* findCheckout(cwd, "/nonexistent-home").pipe(Effect.provideService(Console.Console, captured.console))
          return { root: Option.getOrUndefined(Option.map(found, (c) => c.root)), stderr: captured.stderr }
        })
      // A home seen under another HOME (sudo) whose credentials file is gone: its .grove kept a credentials temp file.
      const home = path.join(top, "home")
      fs.mkdirSync(path.join(home, ".grove"), { recursive: true })
      fs.writeFileSync(path.join(home, ".grove/.credentials.1.ab.tmp"), "")
      fs.mkdirSync(path.join(home, "work"))
      // Other names than a clone writes: content (TreeWalk.groveAt), passed over with no word, as the walk takes it.
      expect(yield* find(path.join(home, "work"))).toEqual({ root: undefined, stderr: [] })
      // Emptied, beside the home's other files: not a checkout, and still no hint to remove the home.
      const other = path.join(top, "other")
      fs.mkdirSync(path.join(other, ".grove"), { recursive: true })
      fs.writeFileSync(path.join(other, ".profile"), "")
      expect(yield* find(other)).toEqual({ root: undefined, stderr: [`warning: ${otherGroveText(other)}`] })
      // A clone killed at once (its folder holds only an empty .grove), or after writing its state and objects.
      const atOnce = path.join(top, "at-once")
      fs.mkdirSync(path.join(atOnce, ".grove"), { recursive: true })
      expect(yield* find(atOnce)).toEqual({ root: undefined, stderr: [`warning: ${unfinishedCloneText(atOnce)}`] })
      const later = path.join(top, "later")
      fs.mkdirSync(path.join(later, ".grove/objects"), { recursive: true })
      fs.writeFileSync(path.join(later, ".grove/state.json"), "{}")
      fs.writeFileSync(path.join(later, ".grove/index.json.12.ab.tmp"), "")
      fs.writeFileSync(path.join(later, "a.txt"), "a")
      expect(yield* find(later)).toEqual({ root: undefined, stderr: [`warning: ${unfinishedCloneText(later)}`] })
    }).pipe(Effect.scoped))

  it.effect("a .grove of repository content is passed over: its folder is part of the checkout above", () =>
    Effect.gen(function*() {
      const outer = yield* tempDir("checkout")
      fs.mkdirSync(path.join(outer, ".grove"))
      fs.writeFileSync(path.join(outer, ".grove/config.json"), JSON.stringify({ remote: "http://127.0.0.1:9" }))
      const find = (cwd: string) =>
        Effect.gen(function*() {
          const captured = captureConsole()
          const found = yield* findCheckout(cwd, "/nonexistent-home").pipe(Effect.provideService(Console.Console, captured.console))
          return { root: Option.getOrUndefined(Option.map(found, (c) => c.root)), stderr: captured.stderr }
        })
      // Other names than a clone writes (sub/.grove/notes.txt).
      fs.mkdirSync(path.join(outer, "sub/.grove"), { recursive: true })
      fs.writeFileSync(path.join(outer, "sub/.grove/notes.txt"), "n")
      expect(yield* find(path.join(outer, "sub"))).toEqual({ root: outer, stderr: [] })
      // A clone's names, but tracked by the checkout above: content too, never an rm -r hint.
      fs.mkdirSync(path.join(outer, "lib/.grove/objects"), { recursive: true })
      fs.writeFileSync(path.join(outer, "lib/.grove/objects/x"), "x")
      const untracked = yield* find(path.join(outer, "lib"))
      expect(untracked.stderr).toEqual([`warning: ${unfinishedCloneText(path.join(outer, "lib"))}`])
      const entry = { hash: "1".repeat(64), mode: "regular" as const, size: 1, mtimeMs: 1, ino: 1, ctimeMs: 1 }
      fs.writeFileSync(indexPath(outer), serializeIndex(new Map([["lib/.grove/objects/x", entry]]), null, new Map(), Date.now()))
      expect(yield* find(path.join(outer, "lib"))).toEqual({ root: outer, stderr: [] })
    }).pipe(Effect.scoped))
})
