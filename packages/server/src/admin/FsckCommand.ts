/**
 * `grove-server fsck [--json] [--concurrency N] [options]`: checks that every reference resolves to
 * a stored object and every stored object hashes to its name (housekeeping/Fsck.ts), printing each
 * problem as it is found and a summary. Exit 0: no problems; 1: problems found (or the check could
 * not finish); 2: bad usage. In embedded mode the server must be stopped (its data directory is
 * locked); in cluster mode it runs beside the nodes, best with gc paused.
 */
import { Effect, Layer } from "effect"
import { ConfigError, parseConfig } from "../Config.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import * as Fsck from "../housekeeping/Fsck.ts"
import { reporter, totalProblems } from "../housekeeping/FsckReport.ts"
import { connectionLayer, objectStoreLayer } from "../Infrastructure.ts"
import * as DataDirLock from "./DataDirLock.ts"

const HELP = `grove-server fsck [--json] [--concurrency N] [options]

Checks that every reference resolves to a stored object and every stored object hashes to its name.
Prints each problem as it is found, then a summary (--json: one JSON object per line). Exit 0: no
problems; 1: problems found, or the check could not finish; 2: bad usage. Options: the server's
(--mode, --data-dir, --database-url, --s3-*; see grove-server --help). --concurrency: objects read
at once (default 8). Embedded mode needs the server stopped. See docs/operations.md.
`

const usage = (message: string) => {
  process.stderr.write(`grove-server fsck: ${message}\n`)
  return 2
}

export const runFsckCommand = async (argv: ReadonlyArray<string>): Promise<number> => {
  const rest: Array<string> = []
  let json = false
  let concurrency = 8
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--help" || arg === "-h") {
      process.stdout.write(HELP)
      return 0
    }
    if (arg === "--json") json = true
    else if (arg === "--concurrency" || arg.startsWith("--concurrency=")) {
      const value = arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : argv[++i]
      concurrency = Number(value)
      if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) {
        return usage(`--concurrency takes a whole number from 1 to 256, not ${JSON.stringify(value ?? "")}`)
      }
    } else rest.push(arg)
  }
  let config
  try {
    config = parseConfig(rest, process.env)
  } catch (error) {
    return usage(error instanceof ConfigError ? error.message : String(error))
  }
  const lock = config.mode === "embedded" ? Layer.effectDiscard(DataDirLock.acquire(config.dataDir)) : Layer.empty
  const database = connectionLayer(config).pipe(Layer.provide(lock))
  const objects = objectStoreLayer(config)
  const layer = ChunkStore.layer.pipe(Layer.provideMerge(Layer.merge(database, objects)))
  const out = reporter(json ? "json" : "text", (line) => process.stdout.write(line))
  return Effect.runPromise(
    Fsck.run({ concurrency }, out.problem).pipe(
      Effect.tap(out.summary),
      Effect.map((summary) => totalProblems(summary) === 0 ? 0 : 1),
      Effect.provide(layer),
      Effect.catchCause((cause) =>
        Effect.sync(() => {
          process.stderr.write(`grove-server fsck: the check could not finish: ${DataDirLock.failureMessage(cause, config.dataDir)}\n`)
          return 1
        })
      )
    )
  )
}
