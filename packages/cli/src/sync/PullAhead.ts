/**
 * A clone's pull, sent before the clone's own modules load (the typed client, the API's schemas, the download: ~80 ms
 * of CPU at a start): the server computes the answer meanwhile. Only the request goes early; the clone takes its
 * answer where it would have sent it (`Fetch.pull`, as the first try of the same request), so what is checked,
 * retried and told is unchanged. An answer the clone does not take (it failed first) is stopped by `cancel`.
 */
import { checkBranchName, parseFullName } from "@grove/core/Names"
import { Effect, Option } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { CliEnv } from "../CliEnv.ts"
import { resolveCredential } from "../CredentialResolver.ts"
import { sendPull } from "../EarlyPull.ts"
import type { Answer } from "./HttpSend.ts"

export interface PullAhead {
  readonly site: string
  readonly owner: string
  readonly name: string
  readonly branch: string
  readonly token: string | undefined
  readonly answer: Promise<Answer>
  readonly cancel: () => void
}

/**
 * Sends the pull of `clone repo [dest] [--branch]` to `remote` with the credential the clone will use; undefined
 * (nothing sent) when the clone would refuse first: a malformed name or branch, a destination that is not empty.
 */
export const pullAhead = (remote: string, input: { readonly repo: string; readonly dest: Option.Option<string>; readonly branch: Option.Option<string> }) =>
  Effect.gen(function*() {
    const parsed = parseFullName(input.repo)
    const branch = Option.getOrElse(input.branch, () => "main")
    if (parsed === undefined || (Option.isSome(input.branch) && !checkBranchName(branch).ok)) return undefined
    const { cwd } = yield* CliEnv
    const root = path.resolve(cwd, Option.getOrElse(input.dest, () => parsed.name))
    // A folder the clone refuses first: no credential resolved (its warnings are the clone's to give).
    const empty = yield* Effect.promise(() => fs.readdir(root).then((entries) => entries.length === 0, (error) => error.code === "ENOENT"))
    if (!empty) return undefined
    const resolution = yield* resolveCredential(remote)
    const token = Option.getOrUndefined(Option.map(resolution.credential, (c) => c.token))
    // The request itself as EarlyPull sends it before Effect loads.
    return yield* Effect.tryPromise(() => sendPull({ site: resolution.remote, owner: parsed.owner, name: parsed.name, branch, token, root }))
  }).pipe(Effect.orElseSucceed(() => undefined))
