/**
 * `grove-server gc [--dry-run] [--json] [options]`: one garbage collection run (housekeeping/GcRun.ts)
 * against the configured database and object store, and what it freed. In embedded mode the server
 * must be stopped (one process opens the data directory; the running server collects on its own
 * schedule, `--gc-interval-seconds`). In cluster mode it runs beside the nodes.
 *
 * An unreferenced object is marked by one run and freed by a run at least the grace period later
 * (`--gc-grace-seconds`), so a fresh install's first run only marks.
 */
import { Effect, Layer } from "effect"
import { ConfigError, DEFAULT_GC, parseConfig } from "../Config.ts"
import { formatReport, runGc } from "../housekeeping/GcRun.ts"
import { databaseLayer, objectStoreLayer } from "../Infrastructure.ts"
import * as DataDirLock from "./DataDirLock.ts"

export const runGcCommand = async (argv: ReadonlyArray<string>): Promise<number> => {
  const dryRun = argv.includes("--dry-run")
  const json = argv.includes("--json")
  let config
  try {
    config = parseConfig(argv.filter((a) => a !== "--dry-run" && a !== "--json"), process.env)
  } catch (error) {
    process.stderr.write(`grove-server gc: ${error instanceof ConfigError ? error.message : String(error)}\n`)
    return 2
  }
  const lock = config.mode === "embedded" ? Layer.effectDiscard(DataDirLock.acquire(config.dataDir)) : Layer.empty
  const layer = Layer.mergeAll(databaseLayer(config), objectStoreLayer(config)).pipe(Layer.provide(lock))
  return Effect.runPromise(
    runGc(config.gc ?? DEFAULT_GC, dryRun).pipe(
      Effect.map((report) => {
        process.stdout.write(json ? `${JSON.stringify(report)}\n` : `${formatReport(report)}\n`)
        return 0
      }),
      Effect.provide(layer),
      Effect.catchCause((cause) =>
        Effect.sync(() => {
          const hint = " (it collects on its own every --gc-interval-seconds)"
          process.stderr.write(`grove-server gc: ${DataDirLock.failureMessage(cause, config.dataDir, hint)}\n`)
          return 1
        })
      )
    )
  )
}
