/**
 * `grove release publish <version> <platform> <file>`: streams the file to
 * `PUT /api/releases/{version}/{platform}` with the resolved credential (a service-account key with
 * the `release` scope of the server's publishing organization). `grove upgrade`: the newest release
 * for this platform, checked against its SHA-256 and the minisign public key built into this binary,
 * then swapped in (`Upgrade.ts`).
 */
import { isPlatform, isVersion } from "@grove/core/release/Versions"
import { Effect, Option } from "effect"
import * as fs from "node:fs"
import { type CallContext, connect, fromErrorBody } from "../Client.ts"
import { failure, networkFailure, usage } from "../Failures.ts"
import { Output } from "../Output.ts"
import { processTimeouts } from "../sync/HttpSend.ts"
import { headersWithin } from "../sync/RemoteRepo.ts"

/**
 * `fetch`, with a transport failure as the client's network failure and an error answer as its failure. Its answer's
 * headers are waited for GROVE_IDLE_TIMEOUT (a read) or GROVE_WRITE_TIMEOUT (an upload), as the other requests are.
 */
export const request = (context: CallContext, url: string, init: RequestInit = {}) =>
  Effect.tryPromise({
    try: (signal) => {
      const bounds = processTimeouts()
      const read = init.method === undefined || init.method === "GET" || init.method === "HEAD"
      const waitMs = read || bounds.idleMs === 0 ? bounds.idleMs : bounds.writeMs === 0 ? 0 : Math.max(bounds.writeMs, bounds.idleMs)
      return headersWithin(
        waitMs,
        (bound) => fetch(url, { ...init, signal: bound === null ? signal : AbortSignal.any([signal, bound]) }),
        read ? "GROVE_IDLE_TIMEOUT" : "GROVE_WRITE_TIMEOUT"
      )
    },
    catch: (error) => networkFailure(context.remote, error)
  }).pipe(Effect.flatMap((response) =>
    response.ok ? Effect.succeed(response) : Effect.flatMap(
      Effect.promise(() => response.json().catch(() => ({}))),
      (body) => Effect.fail(fromErrorBody(response.status, (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>, context))
    )
  ))

export const publish = Effect.fn("Release.publish")(function*(remote: string, input: {
  readonly version: string
  readonly platform: string
  readonly file: string
}) {
  const out = yield* Output
  if (!isVersion(input.version)) return yield* usage(`invalid version '${input.version}': MAJOR.MINOR.PATCH[-prerelease]`)
  if (!isPlatform(input.platform)) return yield* usage(`invalid platform '${input.platform}': os-arch, such as linux-x86_64`)
  const blob = yield* Effect.tryPromise({
    try: () => fs.openAsBlob(input.file),
    catch: () => failure(`cannot read ${input.file}`, "not_found")
  })
  const connection = yield* connect(remote)
  const token = Option.getOrUndefined(Option.map(connection.resolution.credential, (c) => c.token))
  const response = yield* request(connection, `${connection.remote}/api/releases/${input.version}/${input.platform}`, {
    method: "PUT",
    headers: { "content-type": "application/octet-stream", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    body: blob
  })
  const record = (yield* Effect.promise(() => response.json())) as { version: string; platform: string; sha256: string; size: number; url: string }
  yield* out.result(record, () => `Published ${record.version} for ${record.platform} (${record.size} bytes, sha256 ${record.sha256})\n${record.url}`)
})
