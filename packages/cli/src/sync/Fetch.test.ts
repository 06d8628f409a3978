/**
 * materialize refuses a tree whose root holds `.grove` (where a checkout keeps its config, key and state), whatever
 * the server: servers refuse such pushes now, but an older server may still hold one (test/server/sync.test.ts covers
 * the server's side). Nothing is fetched or written.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EMPTY_SNAPSHOT } from "../local/Commit.ts"
import { openAt } from "../local/Workspace.ts"
import { materialize } from "./Fetch.ts"

const HASH = "a".repeat(64)

const tryInto = (files: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-fetch-test-"))
    const to = new Map(files.map((file) => [file, { hash: HASH, mode: "regular" as const }]))
    // No remote: anything that passed the check and was not local would fail with missing_object instead.
    const exit = yield* Effect.exit(materialize(openAt(root, { remote: "http://127.0.0.1:9" }), undefined, EMPTY_SNAPSHOT, to, new Map(), []))
    const left = fs.readdirSync(root)
    fs.rmSync(root, { recursive: true, force: true })
    return { exit, left }
  })

/** The failure's code and message ("success" when it did not fail). */
const codeOf = (exit: Exit.Exit<unknown, { readonly code: string; readonly message: string }>) => {
  if (Exit.isSuccess(exit)) return "success"
  const failure = Cause.squash(exit.cause) as { readonly code?: string; readonly message?: string }
  return `${failure.code}: ${failure.message}`
}

describe("materialize", () => {
  it.effect("refuses a root .grove in any spelling a checkout takes for it, before fetching or writing anything", () =>
    Effect.gen(function*() {
      for (const top of [".grove", ".GROVE", ".Grove", "grove~1", ".gr\u200cove"]) {
        const { exit, left } = yield* tryInto(["a.txt", `${top}/config.json`])
        expect(codeOf(exit)).toContain("reserved_path")
        expect(codeOf(exit)).toContain(`'${top}/'`)
        expect(left).toEqual([])
      }
    }))

  it.effect("takes a deeper .grove and look-alike names as plain paths", () =>
    Effect.gen(function*() {
      const { exit } = yield* tryInto(["sub/.grove/config.json", ".grovex", "grove/x"])
      expect(codeOf(exit)).not.toContain("reserved_path")
      expect(codeOf(exit)).toContain("missing_object")
    }))
})
