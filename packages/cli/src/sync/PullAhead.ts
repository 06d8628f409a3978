/**
 * A clone's pull, sent before the clone's own modules load (the typed client, the API's schemas, the download: ~80 ms
 * of CPU at a start): the server computes the answer meanwhile. Only the request goes early; the clone takes its
 * answer where it would have sent it (`Fetch.pull`, as the first try of the same request), so what is checked,
 * retried and told is unchanged. An answer the clone does not take (it failed first) is stopped by `cancel`.
 */
import { checkBranchName, parseFullName } from "@grove/core/Names"
import * as CompactPull from "@grove/core/objects/CompactPull"
import { Effect, Option } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { CliEnv } from "../CliEnv.ts"
import { resolveCredential } from "../CredentialResolver.ts"
import { ACCEPT_ENCODING, askCapabilitiesEarly, COMPRESS_FROM, downloadCompression } from "./BodyCompression.ts"
import { type Answer, sendBytes } from "./HttpSend.ts"

export interface PullAhead {
  readonly site: string
  readonly owner: string
  readonly name: string
  readonly branch: string
  readonly token: string | undefined
  readonly answer: Promise<Answer>
  readonly cancel: () => void
}

/** The pull request a clone's RemoteRepo sends (`Fetch.pull` of a whole branch): same URL and headers (Accept too). */
export const pullUrl = (site: string, owner: string, name: string, branch: string) =>
  `${site}/api/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/pull?${new URLSearchParams({ branch_name: branch })}`

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
    const empty = yield* Effect.promise(() => fs.readdir(root).then((entries) => entries.length === 0, (error) => error.code === "ENOENT"))
    if (!empty) return undefined
    const resolution = yield* resolveCredential(remote)
    const site = resolution.remote
    const token = Option.getOrUndefined(Option.map(resolution.credential, (c) => c.token))
    // For the chunk requests' hash lists, which go zstd only to another machine (Download.squeezesHashLists: not
    // imported here, the download's modules load after the pull is sent).
    if (downloadCompression(site)) askCapabilitiesEarly(site, token, COMPRESS_FROM)
    const headers: Record<string, string> = {}
    if (token !== undefined) headers["authorization"] = `Bearer ${token}`
    if (downloadCompression(site)) headers["accept-encoding"] = ACCEPT_ENCODING
    headers["accept"] = CompactPull.ACCEPT
    const controller = new AbortController()
    const answer = sendBytes(pullUrl(site, parsed.owner, parsed.name, branch), { method: "GET", headers, signal: controller.signal })
    // Not taken: its failure is nobody's. Once settled there is nothing to stop (its socket may serve another request).
    let settled = false
    answer.then(() => (settled = true), () => (settled = true))
    const cancel = () => {
      if (!settled) controller.abort()
    }
    // The request is written once its connection is made, in a poll phase of the event loop: the module loading that
    // follows would hold it back until it ends. Two turns let a near server's connection complete and the request go.
    yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve))))
    return { site, owner: parsed.owner, name: parsed.name, branch, token, answer, cancel } satisfies PullAhead
  }).pipe(Effect.orElseSucceed(() => undefined))
