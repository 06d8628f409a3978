/**
 * A checkout is a directory with `.grove/config.json` (written by clone):
 * `{ "remote": "...", "key": "grove_..." }`. The nearest one above the working
 * directory counts. The home directory's `.grove` holds the user's
 * credentials, not a checkout, so the walk skips it.
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
    }
    const parent = path.dirname(dir)
    if (parent === dir) return Option.none<Checkout>()
    dir = parent
  }
})
