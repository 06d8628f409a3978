/**
 * A checkout is a directory with `.grove/config.json` (written by clone):
 * `{ "remote": "...", "key": "grove_..." }`. The nearest one above the working
 * directory counts. The home directory's `.grove` holds the user's
 * credentials, not a checkout, so the walk skips it, and so is a `.grove` of repository content (other names than a
 * clone writes, or tracked by the checkout above: TreeWalk.groveAt). Any other `.grove` without its config.json stops
 * the walk: a checkout above does not take that folder's files (local/TreeWalk.ts); most often it is a clone that did
 * not finish (killed before it wrote the config, last), and only then does the warning say to remove it.
 */
import { Console, Effect, Exit, Option, Schema } from "effect"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { readIndexSync } from "./local/IndexFile.ts"
import { cloneWrote, tracksUnder } from "./local/TreeWalk.ts"

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

const namesIn = (dir: string) => fs.readdir(dir).catch((): Array<string> | undefined => undefined)

/**
 * What the `.grove` of `dir` is, given no config.json in it (checked by the caller), by the walk's rule
 * (TreeWalk.groveAt): none (no such directory); a home's (credentials: one seen under another HOME); content (other
 * names, or tracked by the checkout above: repository content, `dir` is part of that checkout); a clone's that did not
 * finish (only what a clone writes in it, or nothing in a folder holding nothing else: killed at once); else another's
 * (empty beside other files: not a checkout, and no rm -r hint).
 */
const groveKind = async (dir: string): Promise<"none" | "home" | "content" | "unfinished" | "other"> => {
  const names = await namesIn(path.join(dir, ".grove"))
  if (names === undefined) return "none" // missing, or a file
  if (names.includes("credentials")) return "home"
  if (!names.every(cloneWrote) || trackedAbove(dir)) return "content"
  if (names.length > 0) return "unfinished"
  const beside = await namesIn(dir)
  return beside !== undefined && beside.length === 1 ? "unfinished" : "other"
}

/** The nearest checkout above `dir` tracks files in `dir` (its folder, as the walk has it: never an rm -r hint). */
const trackedAbove = (dir: string): boolean => {
  for (let above = path.dirname(dir); ; above = path.dirname(above)) {
    if (fsSync.existsSync(path.join(above, ".grove", "config.json"))) {
      try {
        return tracksUnder(readIndexSync(above).files, `${path.relative(above, dir).split(path.sep).join("/")}/`)
      } catch {
        return false // an unreadable index: nothing known to be tracked there
      }
    }
    if (path.dirname(above) === above) return false
  }
}

/** Each warning once per command: its credential and its checkout are both looked up (CredentialResolver, Workspace). */
const warned = new Set<string>()

const warnOnce = (text: string) =>
  Effect.suspend(() => {
    if (warned.has(text)) return Effect.void
    warned.add(text)
    return Console.error(`warning: ${text}`)
  })

/** What a command run in an unfinished clone says (as a clone into it does). */
export const unfinishedCloneText = (dir: string): string =>
  `${dir} holds a clone that did not finish (it was stopped before every file was in place): remove it (rm -r ${dir}) and clone again`

/** What a command says under a `.grove` without config.json that is not what a clone leaves. */
export const otherGroveText = (dir: string): string =>
  `ignoring ${path.join(dir, ".grove")}: no config.json, so ${dir} is not a checkout (nor part of one above it)`

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
        yield* warnOnce(`ignoring ${configPath}: not a valid checkout config`)
        return Option.none<Checkout>()
      }
      // A `.grove` of content (TreeWalk.groveAt) is passed over: its folder is part of the checkout above, as the walk has it.
      const kind = yield* Effect.promise(() => groveKind(dir))
      if (kind === "unfinished" || kind === "other") {
        yield* warnOnce(kind === "unfinished" ? unfinishedCloneText(dir) : otherGroveText(dir))
        return Option.none<Checkout>()
      }
    }
    const parent = path.dirname(dir)
    if (parent === dir) return Option.none<Checkout>()
    dir = parent
  }
})
