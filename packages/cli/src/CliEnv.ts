/**
 * What the client reads from its surroundings, as one service so tests can
 * point it at a temporary home and working directory.
 */
import { Context, Layer } from "effect"
import { homedir } from "node:os"

export interface CliEnvShape {
  readonly home: string
  readonly cwd: string
  readonly env: Readonly<Record<string, string | undefined>>
}

export class CliEnv extends Context.Service<CliEnv, CliEnvShape>()("grove/cli/CliEnv") {
  static readonly layer = Layer.sync(CliEnv, () => ({ home: homedir(), cwd: process.cwd(), env: process.env }))
  static readonly layerWith = (shape: CliEnvShape) => Layer.succeed(CliEnv, shape)
}
