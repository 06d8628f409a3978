/**
 * `grove push` with nothing to push, answered before the client is loaded
 * (Effect, the HTTP client and the API schemas cost more start-up time than the
 * whole answer): the checkout's branch is on the server at its local head, no
 * metadata is pending, and the working tree is exactly that head as the index
 * records it (`treeUnchanged`). Anything else, or any doubt (a broken file, a
 * merge in progress, flags other than --json), returns undefined and the full
 * command runs; it reaches the same answer the slow way when there is one.
 * Node built-ins only.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { chooseRemote } from "./Remote.ts"
import { readIndexSync, treeUnchanged } from "./local/TreeStatus.ts"

const readJson = (file: string): unknown => {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"))
  } catch {
    return undefined
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The nearest directory at or above `cwd` with a `.grove/config.json` (never `home`, whose `.grove` holds credentials). */
const checkoutRoot = (cwd: string, home: string): { readonly root: string; readonly config: unknown } | undefined => {
  const homeDir = path.resolve(home)
  for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
    if (dir !== homeDir) {
      const file = path.join(dir, ".grove", "config.json")
      if (fs.existsSync(file)) return { root: dir, config: readJson(file) }
    }
    if (path.dirname(dir) === dir) return undefined
  }
}

export interface NoopPushInput {
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  readonly home: string
}

/** What `grove push` prints when there is provably nothing to push, else undefined. */
export const noopPush = ({ args, cwd, env, home }: NoopPushInput): string | undefined => {
  const json = args.includes("--json")
  if (args.filter((a) => a !== "--json").join(" ") !== "push") return undefined
  if ("error" in chooseRemote(undefined, env)) return undefined // the full command reports it
  const found = checkoutRoot(cwd, home)
  if (found === undefined || !isRecord(found.config)) return undefined
  const { key, name, owner, remote } = found.config
  if (typeof remote !== "string" || typeof owner !== "string" || typeof name !== "string") return undefined
  if (key !== undefined && typeof key !== "string") return undefined
  const state = readJson(path.join(found.root, ".grove", "state.json"))
  if (!isRecord(state) || state["version"] !== 1 || state["merge"] !== undefined || !isRecord(state["branches"])) return undefined
  const branch = state["branches"][String(state["branch"])]
  if (!isRecord(branch) || typeof branch["name"] !== "string" || branch["name"] === "main") return undefined
  const head = branch["head"]
  if (typeof head !== "string" || branch["remote_head"] !== head) return undefined
  if (!Array.isArray(branch["unpushed"]) || branch["unpushed"].length > 0) return undefined
  if (branch["description_pending"] === true || branch["close_pending"] === true) return undefined
  const index = readIndexSync(found.root)
  if (index.base !== head || !treeUnchanged(found.root, index)) return undefined
  return json
    ? JSON.stringify(
      { branch: branch["name"], head, pushed_commits: 0, uploaded_chunks: 0, uploaded_bytes: 0, sent_bytes: 0, created_repository: false },
      null,
      2
    )
    : `Already up to date (${branch["name"]}).`
}
