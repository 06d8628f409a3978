/**
 * A checkout opened for a content command: its root, `.grove/config.json`
 * (server, owner/name, stored key), `.grove/state.json` and the object store.
 */
import { Effect, Option } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { CheckoutConfig } from "../Checkout.ts"
import { findCheckout } from "../Checkout.ts"
import { CliEnv } from "../CliEnv.ts"
import { failure } from "../Failures.ts"
import type { CliFailure } from "../Failures.ts"
import { io, readTextIfExists, writeJsonAtomic } from "./Io.ts"
import type { ObjectStore } from "./Objects.ts"
import { openObjects } from "./Objects.ts"
import type { RepoState } from "./State.ts"
import { statePath } from "./State.ts"

export interface Workspace {
  readonly root: string
  readonly configPath: string
  readonly config: CheckoutConfig
  readonly objects: ObjectStore
}

export const readState = Effect.fn("State.read")(function*(root: string) {
  const file = statePath(root)
  const text = yield* io(`cannot read ${file}`, () => readTextIfExists(file))
  if (text === undefined) return yield* failure(`${file} is missing: this checkout is incomplete (run grove init or grove clone)`, "not_a_checkout")
  const state = yield* Effect.try({
    try: () => JSON.parse(text) as RepoState,
    catch: () => failure(`${file} is not valid JSON`, "bad_state")
  })
  if (state.version !== 1 || typeof state.branch !== "string" || state.branches[state.branch] === undefined) {
    return yield* failure(`${file} is not a state file this client understands`, "bad_state")
  }
  return state
})

export const writeState = (root: string, state: RepoState): Effect.Effect<void, CliFailure> =>
  io(`cannot write ${statePath(root)}`, () => writeJsonAtomic(statePath(root), state))

export const openAt = (root: string, config: CheckoutConfig): Workspace => ({
  root,
  configPath: path.join(root, ".grove", "config.json"),
  config,
  objects: openObjects(root)
})

/** The checkout at or above the working directory, with its state. */
export const openWorkspace = Effect.fn("Workspace.open")(function*() {
  const { cwd, home } = yield* CliEnv
  const found = yield* findCheckout(cwd, home)
  if (Option.isNone(found)) return yield* failure("not in a grove checkout (run grove init or grove clone)", "not_a_checkout")
  const workspace = openAt(found.value.root, found.value.config)
  const state = yield* readState(workspace.root)
  return { workspace, state }
})

/** Writes `.grove/config.json` (it may hold a key: owner-only, replaced atomically). */
export const writeConfig = (root: string, config: CheckoutConfig): Effect.Effect<Workspace, CliFailure> =>
  Effect.as(
    io("cannot write the checkout config", async () => {
      const dir = path.join(root, ".grove")
      await fs.mkdir(dir, { recursive: true })
      const file = path.join(dir, "config.json")
      const temp = `${file}.${process.pid}.tmp`
      await fs.writeFile(temp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 })
      await fs.rename(temp, file)
    }),
    openAt(root, config)
  )

export const saveState = (workspace: Workspace, state: RepoState): Effect.Effect<void, CliFailure> => writeState(workspace.root, state)

/** owner/name of the checkout's repository, once known. */
export const repositoryOf = (workspace: Workspace): { readonly owner: string; readonly name: string } | undefined =>
  workspace.config.owner !== undefined && workspace.config.name !== undefined
    ? { owner: workspace.config.owner, name: workspace.config.name }
    : undefined
