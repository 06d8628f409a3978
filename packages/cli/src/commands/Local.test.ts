/**
 * `grove diff` in a checkout, in process (no server: nothing is fetched when no base content is needed).
 */
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { captureConsole, envLayer, scriptedInteraction, tempDir } from "../../test/support.ts"
import { run } from "../Cli.ts"
import { initialState, newBranch, statePath } from "../local/State.ts"

/** A checkout of alice/demo that never committed (no head: every file is new), on a server nobody asks. */
const checkout = (root: string) => {
  fs.mkdirSync(path.join(root, ".grove"))
  fs.writeFileSync(path.join(root, ".grove/config.json"), JSON.stringify({ remote: "http://127.0.0.1:9", owner: "alice", name: "demo" }))
  fs.writeFileSync(statePath(root), JSON.stringify(initialState("alice", newBranch("alice-1a2b3c"))))
}

const grove = (root: string, home: string, argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const captured = captureConsole()
    const code = yield* run(argv).pipe(
      Effect.provide(Layer.merge(envLayer({ home, cwd: root }), scriptedInteraction(false).layer)),
      Effect.provideService(Console.Console, captured.console)
    )
    return { code, stdout: captured.stdout, stderr: captured.stderr }
  })

describe("grove diff", () => {
  it.effect("prints nothing and exits 0 when nothing changed, as git diff; --json still gives its document", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("diff")
      const home = yield* tempDir("diff-home")
      checkout(root)
      expect(yield* grove(root, home, ["diff"])).toEqual({ code: 0, stdout: [], stderr: [] })
      const asJson = yield* grove(root, home, ["diff", "--json"])
      expect(asJson.code).toBe(0)
      expect(JSON.parse(asJson.stdout.join("\n"))).toEqual({ files: [] })
      // A change is printed as before.
      fs.writeFileSync(path.join(root, "a.txt"), "hello\n")
      const changed = yield* grove(root, home, ["diff", "--no-color"])
      expect(changed.code).toBe(0)
      expect(changed.stdout.join("\n")).toContain("+hello")
    }).pipe(Effect.scoped))
})
