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
