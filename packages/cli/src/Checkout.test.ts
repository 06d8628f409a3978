import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { captureConsole, tempDir } from "../test/support.ts"
import { findCheckout, unfinishedCloneText } from "./Checkout.ts"

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
      expect(yield* find(path.join(dest, "src"))).toEqual({ root: undefined, stderr: said })
      expect(unfinishedCloneText(dest)).toContain("did not finish")
      // The outer checkout is found from its own folders.
      expect(yield* find(outer)).toEqual({ root: outer, stderr: [] })
      // A .grove holding credentials (a home's, seen under another HOME) is no clone: passed over as before.
      fs.rmSync(path.join(dest, ".grove"), { recursive: true })
      fs.mkdirSync(path.join(dest, ".grove"))
      fs.writeFileSync(path.join(dest, ".grove/credentials"), "{}")
      expect(yield* find(dest)).toEqual({ root: outer, stderr: [] })
    }).pipe(Effect.scoped))
})
