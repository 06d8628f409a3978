/**
 * A checkout is a directory with `.grove/config.json` (written by clone):
 * `{ "remote": "...", "key": "grove_..." }`. The nearest one above the working
 * directory counts. The home directory's `.grove` holds the user's
 * credentials, not a checkout, so the walk skips it. A `.grove` without its config.json (nor credentials) is a clone
 * that did not finish (killed before it wrote the config, last): the walk stops there, since a checkout above it
 * would take the unfinished clone's files for its own new files.
 */
import { Console, Effect, Exit, Option, Schema } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"

export const CheckoutConfig = Schema.Struct({
  remote: Schema.String,
  key: Schema.optionalKey(Schema.String),
  owner: Schema.optionalKey(Schema.String),
  name: Schema.optionalKey(Schema.String)
})
export type CheckoutConfig = typeof CheckoutConfig.Type

export interface Checkout {
  /** The checkout's root directory. */
  readonly root: string
  /** Its `.grove/config.json`. */
  readonly configPath: string
  readonly config: CheckoutConfig
}

const decode = Schema.decodeUnknownExit(Schema.fromJsonString(CheckoutConfig))

const readText = (file: string) =>
  Effect.promise(() => fs.readFile(file, "utf8").then((text): string | undefined => text, () => undefined))

/**
 * `dir` has a `.grove` directory without config.json (checked missing by the caller) and without credentials (a
 * home's `.grove` seen under another HOME): what a clone killed before it finished leaves (commands/Init.ts).
 */
const unfinishedClone = (dir: string): Promise<boolean> =>
  fs.stat(path.join(dir, ".grove")).then(
    (stats) => stats.isDirectory() && fs.access(path.join(dir, ".grove", "credentials")).then(() => false, () => true),
    () => false
  )

/** What a command run in an unfinished clone says (as a clone into it does). */
export const unfinishedCloneText = (dir: string): string =>
  `${dir} holds a clone that did not finish (it was stopped before every file was in place): remove it (rm -r ${dir}) and clone again`

/** The nearest checkout at or above `cwd`. A broken config is reported on stderr and ignored. */
export const findCheckout = Effect.fn("Checkout.find")(function*(cwd: string, home: string) {
  const homeDir = path.resolve(home)
  let dir = path.resolve(cwd)
  while (true) {
    if (dir !== homeDir) {
      const configPath = path.join(dir, ".grove", "config.json")
      const text = yield* readText(configPath)
      if (text !== undefined) {
        const config = decode(text)
        if (Exit.isSuccess(config)) return Option.some<Checkout>({ root: dir, configPath, config: config.value })
        yield* Console.error(`warning: ignoring ${configPath}: not a valid checkout config`)
        return Option.none<Checkout>()
      }
      if (yield* Effect.promise(() => unfinishedClone(dir))) {
        yield* Console.error(`warning: ${unfinishedCloneText(dir)}`)
        return Option.none<Checkout>()
      }
    }
    const parent = path.dirname(dir)
    if (parent === dir) return Option.none<Checkout>()
    dir = parent
  }
})
