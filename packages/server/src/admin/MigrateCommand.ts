/**
 * `grove-server migrate`: applies the pending database migrations and says what it did. Run it once per
 * upgrade, before the new version's nodes (which, with `--migrations wait`, wait for it; a node never
 * starts against a schema newer than it knows). Safe to run from several places at once: PostgreSQL's
 * migrator locks its table.
 */
import { Migrations } from "@grove/storage"
import { Effect, Layer } from "effect"
import { ConfigError, parseConfig } from "../Config.ts"
import * as DataDirLock from "./DataDirLock.ts"
import { connectionLayer } from "../Infrastructure.ts"

export const runMigrateCommand = async (argv: ReadonlyArray<string>): Promise<number> => {
  let config
  try {
    config = parseConfig(argv, process.env)
  } catch (error) {
    process.stderr.write(`grove-server migrate: ${error instanceof ConfigError ? error.message : String(error)}\n`)
    return 2
  }
  const lock = config.mode === "embedded" ? Layer.effectDiscard(DataDirLock.acquire(config.dataDir)) : Layer.empty
  const where = config.mode === "embedded" ? `the embedded database in ${config.dataDir}` : "the PostgreSQL database"
  const outcome = await Effect.runPromise(
    Migrations.migrate.pipe(
      Effect.map(({ applied, version }) => {
        process.stdout.write(
          applied.length === 0
            ? `${where} is at migration ${version}, this version's latest: nothing to apply\n`
            : `applied ${applied.length} migration${applied.length === 1 ? "" : "s"} to ${where}: ${applied.join(", ")}; ` +
              `it is now at migration ${version}\n`
        )
        return 0
      }),
      Effect.provide(connectionLayer(config).pipe(Layer.provide(lock))),
      Effect.catchCause((cause) =>
        Effect.sync(() => {
          process.stderr.write(`grove-server migrate: ${DataDirLock.failureMessage(cause, config.dataDir)}\n`)
          return 1
        })
      )
    )
  )
  return outcome
}
