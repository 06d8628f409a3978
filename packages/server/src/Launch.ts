/**
 * Runs the server until a signal stops it (main.ts loads this for `serve`, after its checks). Effect is
 * imported here by name, not as main.ts's `import("effect")`: a dynamic import of the package needs its whole
 * namespace, which kept every module of effect in the bundle and evaluated all of them at each start.
 */
// The module, not the package's index: the index loads every platform module (redis, undici, workers).
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Layer, Runtime } from "effect"
import type { ServerConfigShape } from "./Config.ts"
import { serverLayer } from "./Server.ts"

/** The start's known mistakes, said by main.ts in its own words. */
export interface StartFailures {
  readonly dataDirBusy: (pid: number) => void
  readonly schemaTooNew: (message: string) => void
  readonly cannotListen: (code: string) => void
}

export const launch = (config: ServerConfigShape, failures: StartFailures): void =>
  Layer.launch(serverLayer(config)).pipe(
    Effect.catchCause((cause) => {
      // The same mistakes as main.ts checks first, when another process got there between the check and the start.
      const error = Cause.squash(cause) as { _tag?: string; pid?: number; cause?: NodeJS.ErrnoException }
      if (error?._tag === "DataDirBusy") return Effect.sync(() => failures.dataDirBusy(error.pid ?? 0))
      if (error?._tag === "SchemaTooNew") return Effect.sync(() => failures.schemaTooNew((error as { message: string }).message))
      if (error?._tag === "ServeError" && error.cause?.code !== undefined) {
        return Effect.sync(() => failures.cannotListen(error.cause!.code!))
      }
      return Effect.andThen(Effect.logError("grove-server stopped", cause), Effect.failCause(cause))
    }),
    // Stopped by a signal (SIGTERM, Ctrl-C) after draining: a clean stop, exit 0.
    (program) =>
      NodeRuntime.runMain(program, {
        teardown: (exit, onExit) =>
          Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
      })
  )
