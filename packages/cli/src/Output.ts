/**
 * Where command output goes. With `--json`, stdout carries exactly one JSON
 * document (the API response, or `{ error, code }`); without it, text for
 * people. Progress notes, prompts and warnings always go to stderr.
 */
import { Console, Context, Effect, Layer } from "effect"
import type { CliFailure } from "./Failures.ts"
import { toJson } from "./Failures.ts"

export interface OutputShape {
  readonly json: boolean
  /** The command's result: `value` as JSON, or the human text. */
  readonly result: (value: unknown, human: () => string) => Effect.Effect<void>
  /** A line for people on stderr (never part of the JSON document). */
  readonly note: (text: string) => Effect.Effect<void>
  readonly failure: (failure: CliFailure) => Effect.Effect<void>
}

export class Output extends Context.Service<Output, OutputShape>()("grove/cli/Output") {
  static readonly make = (json: boolean): OutputShape => ({
    json,
    result: (value, human) => json ? Console.log(JSON.stringify(value, null, 2)) : Console.log(human()),
    note: (text) => Console.error(text),
    failure: (failure) =>
      json ? Console.log(JSON.stringify(toJson(failure), null, 2)) : Console.error(`grove: ${failure.message}`)
  })
  static readonly layer = (json: boolean) => Layer.succeed(Output, Output.make(json))
}

/** Left-aligned columns separated by two spaces; the last column is not padded. */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const all = [headers, ...rows]
  const widths = headers.map((_, i) => Math.max(...all.map((row) => (row[i] ?? "").length)))
  return all
    .map((row) => row.map((cell, i) => i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)).join("  ").trimEnd())
    .join("\n")
}
