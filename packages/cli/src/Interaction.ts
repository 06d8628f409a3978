/**
 * Questions to the person at the keyboard: the prompt goes to stderr, the
 * answer is one line of stdin (a terminal or a pipe).
 */
import { Context, Effect, Layer, Option } from "effect"

export interface InteractionShape {
  /** Whether stdin is a terminal (someone can answer a question). */
  readonly isTerminal: boolean
  /** One line of stdin without its newline; none at end of input. */
  readonly readLine: (prompt: string) => Effect.Effect<Option.Option<string>>
}

const readLineFromStdin = (prompt: string) =>
  Effect.callback<Option.Option<string>>((resume) => {
    // Loaded on the first question, not at every start.
    const rl = process.getBuiltinModule("node:readline").createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY === true })
    let answered = false
    rl.once("line", (line) => {
      answered = true
      rl.close()
      // A piped answer is not echoed: end the prompt's line.
      if (process.stdin.isTTY !== true) process.stderr.write("\n")
      resume(Effect.succeed(Option.some(line)))
    })
    rl.once("close", () => {
      if (!answered) resume(Effect.succeed(Option.none()))
    })
    process.stderr.write(prompt)
    return Effect.sync(() => rl.close())
  })

export class Interaction extends Context.Service<Interaction, InteractionShape>()("grove/cli/Interaction") {
  static readonly layer = Layer.sync(Interaction, () => ({
    isTerminal: process.stdin.isTTY === true,
    readLine: readLineFromStdin
  }))
}
