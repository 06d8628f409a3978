import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { captureConsole, envLayer, scriptedInteraction, tempDir } from "../test/support.ts"
import { run } from "./Cli.ts"
import { direct } from "./Direct.ts"

/** Runs `program` with `cwd` as the working directory; answers the exit code and what was printed. */
const capture = <E, R>(program: Effect.Effect<number, E, R>, cwd: string, home: string) =>
  Effect.gen(function*() {
    const captured = captureConsole()
    const exitCode = yield* (program as Effect.Effect<number, E, never>).pipe(
      Effect.provide(Layer.merge(envLayer({ home, cwd, env: { GROVE_REMOTE: "http://127.0.0.1:9" } }), scriptedInteraction(false).layer)),
      Effect.provideService(Console.Console, captured.console)
    )
    return { exitCode, stdout: captured.stdout.join("\n"), stderr: captured.stderr.join("\n") }
  })

describe("commands run without the command tree", () => {
  it("only the argument-less content commands, alone or with --json, skip the tree", () => {
    for (const argv of [["push"], ["push", "--json"], ["--json", "push"], ["commit"], ["pull", "--json"], ["status"]]) {
      expect({ argv, direct: direct(argv) !== undefined }).toEqual({ argv, direct: true })
    }
    const parsed = [
      [],
      ["--json"],
      ["push", "--json", "--json"],
      ["push", "--json=true"],
      ["push", "--remote", "http://x"],
      ["push", "--help"],
      ["push", "extra"],
      ["log"],
      ["pushx"],
      ["toString"],
      ["constructor", "--json"]
    ]
    for (const argv of parsed) expect({ argv, direct: direct(argv) !== undefined }).toEqual({ argv, direct: false })
  })

  it("clone in its plain forms skips the tree; any other form goes through it", () => {
    const plain = [
      ["clone", "o/n"],
      ["clone", "o/n", "dest", "--json"],
      ["--json", "clone", "o/n", "--branch", "b"],
      ["--remote", "http://x", "clone", "o/n", "--branch=b", "dest"],
      ["clone", "--remote=http://x", "o/n"]
    ]
    for (const argv of plain) expect({ argv, direct: direct(argv) !== undefined }).toEqual({ argv, direct: true })
    const parsed = [
      ["clone"],
      ["clone", "o/n", "dest", "extra"],
      ["clone", "o/n", "--help"],
      ["clone", "o/n", "-h"],
      ["clone", "o/n", "--branch"],
      ["clone", "o/n", "--branch", "--json"],
      ["clone", "o/n", "--branch="],
      ["clone", "o/n", "--branch", "a", "--branch", "b"],
      ["--branch", "b", "clone", "o/n"],
      ["clone", "o/n", "--remote", "http://x", "--remote=http://y"],
      ["clone", "o/n", "--remotes", "http://x"],
      ["clone", "o/n", "--json", "--json"],
      ["clone", "o/n", "--json=true"],
      ["clone", "o/n", "--", "dest"],
      ["init", "o/n"],
      ["o/n", "clone"]
    ]
    for (const argv of parsed) expect({ argv, direct: direct(argv) !== undefined }).toEqual({ argv, direct: false })
  })

  it.live("clone answers as the command tree does when it cannot start", () =>
    Effect.gen(function*() {
      const home = yield* tempDir("home")
      const cwd = yield* tempDir("cwd")
      fs.writeFileSync(path.join(cwd, "taken"), "a file")
      const cases = [
        ["clone", "nameonly"],
        ["clone", "o/n", "--branch", "bad..name", "--json"],
        ["clone", "o/n", "taken"],
        ["--json", "clone", "o/n", "taken"],
        ["clone", "o/n", "fresh", "--remote", "http://127.0.0.1:9"]
      ]
      for (const argv of cases) {
        const viaTree = yield* capture(run(argv), cwd, home)
        const viaDirect = yield* capture(direct(argv)!, cwd, home)
        expect(viaTree.exitCode, argv.join(" ")).not.toBe(0)
        expect({ argv, ...viaDirect }).toEqual({ argv, ...viaTree })
      }
      expect(fs.readdirSync(cwd)).toEqual(["taken"])
    }))

  it.live("answer as the command tree does: the same exit code and output, outside a checkout and in a broken one", () =>
    Effect.gen(function*() {
      const home = yield* tempDir("home")
      const outside = yield* tempDir("outside")
      // A checkout whose state file is missing: every command fails reading it.
      const broken = yield* tempDir("broken")
      fs.mkdirSync(path.join(broken, ".grove"))
      fs.writeFileSync(path.join(broken, ".grove", "config.json"), JSON.stringify({ remote: "http://127.0.0.1:9", owner: "o", name: "n" }))
      for (const cwd of [outside, broken]) {
        for (const argv of [["push"], ["push", "--json"], ["--json", "commit"], ["pull"], ["status", "--json"]]) {
          const viaTree = yield* capture(run(argv), cwd, home)
          const viaDirect = yield* capture(direct(argv)!, cwd, home)
          expect(viaTree.exitCode, argv.join(" ")).not.toBe(0)
          expect(viaTree.stdout + viaTree.stderr, argv.join(" ")).toMatch(/not in a grove checkout|state\.json is missing/)
          expect({ argv, ...viaDirect }).toEqual({ argv, ...viaTree })
        }
      }
    }))
})
