import { describe, expect, it } from "@effect/vitest"
import { Console, Effect } from "effect"
import { captureConsole } from "../test/support.ts"
import { failure } from "./Failures.ts"
import { Output, table } from "./Output.ts"

describe("Output", () => {
  it("lays out tables in columns without trailing spaces", () => {
    expect(table(["NAME", "VISIBILITY", "DESCRIPTION"], [["alice/a-long-name", "private", ""], ["bob/x", "public", "hello"]])).toBe(
      [
        "NAME               VISIBILITY  DESCRIPTION",
        "alice/a-long-name  private",
        "bob/x              public      hello"
      ].join("\n")
    )
  })

  it.effect("--json: results and failures are one JSON document on stdout; notes stay on stderr", () =>
    Effect.gen(function*() {
      const captured = captureConsole()
      const json = Output.make(true)
      yield* Effect.provideService(
        Effect.all([json.note("progress"), json.result({ a: 1 }, () => "human"), json.failure(failure("nope", "name_taken", { status: 409 }))]),
        Console.Console,
        captured.console
      )
      expect(captured.stdout.map((s) => JSON.parse(s))).toEqual([{ a: 1 }, { error: "nope", code: "name_taken", status: 409 }])
      expect(captured.stderr).toEqual(["progress"])

      const people = captureConsole()
      const human = Output.make(false)
      yield* Effect.provideService(Effect.all([human.result({ a: 1 }, () => "human"), human.failure(failure("nope"))]), Console.Console, people.console)
      expect(people.stdout).toEqual(["human"])
      expect(people.stderr).toEqual(["grove: nope"])
    }))
})
