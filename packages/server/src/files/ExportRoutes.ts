/**
 * Main outside the JSON API:
 * - `GET {site_url}/{owner}/{name}/download`: a zip of main's files, streamed.
 * - `{site_url}/{owner}/{name}.git`: a clone for the stock git client (smart HTTP, upload-pack
 *   only), built from Grove's objects as one pack per main head and cached on disk.
 * Private repositories answer anonymous git requests 401 with a Basic challenge so git asks for
 * credentials (the password is a Grove token); callers who may not see them get 404.
 */
import { ApiErrors, ApiParams, type Caller } from "@grove/api"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as path from "node:path"
import { Authorizer } from "../access/Authorizer.ts"
import { ServerConfig } from "../Config.ts"
import { Branches } from "../content/Branches.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { History } from "../content/History.ts"
import { mainHistory, storedSnapshot } from "../content/StoredSnapshot.ts"
import { buildPack } from "../export/GitPack.ts"
import { ADVERTISEMENT_CONTENT_TYPE, advertiseRefs, RESULT_CONTENT_TYPE, uploadPack } from "../export/GitSmartHttp.ts"
import { PackCache } from "../export/PackCache.ts"
import { ZIP_CONTENT_TYPE, zipSnapshot } from "../export/Zip.ts"
import { callerOf } from "../http/Authentication.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { invalidParams, routeParams } from "../http/PathParams.ts"
import { answer, errorResponse, readBody } from "../http/RawRoutes.ts"
import { Identity } from "../access/Identity.ts"
import { callerPolicy } from "../path-permissions/CallerPolicy.ts"
import { filteredRoot, filteredSnapshot } from "../path-permissions/FilteredSnapshot.ts"
import type { Policy } from "../path-permissions/PathPermissions.ts"

const MAIN = "main"

/** `Bearer <token>`, or git's `Basic base64(user:token)`: the password is the token. */
const gitCaller = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const identity = yield* Identity
  const header = request.headers["authorization"]
  const basic = header === undefined ? null : /^Basic\s+(\S+)\s*$/i.exec(header)
  if (basic === null) return yield* callerOf(identity, header)
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8")
  const token = decoded.slice(decoded.indexOf(":") + 1)
  return yield* callerOf(identity, `Bearer ${token}`)
})

const challenge = new ApiErrors.Unauthorized({ error: "sign in: use a Grove token as the password", code: "unauthenticated" })

/** The repository, main's head and the caller's path policy; anonymous callers of anything not public get the 401 challenge. */
const mainOf = (caller: Caller, owner: string, name: string, anonymousChallenge: boolean) =>
  Effect.gen(function*() {
    const authorizer = yield* Authorizer
    const branches = yield* Branches
    const repo = yield* dbUnavailable(authorizer.repository(caller, owner, name, "read")).pipe(
      Effect.catch((e) =>
        anonymousChallenge && caller.principal.kind === "anonymous" && e instanceof ApiErrors.NotFound ? Effect.fail(challenge) : Effect.fail(e)
      )
    )
    const main = yield* dbUnavailable(branches.get(repo.id, MAIN))
    return { repo, head: main?.head ?? null, policy: yield* callerPolicy(caller, repo) }
  })

const gitResponse = <E extends ApiErrors.Unauthorized | ApiErrors.NotFound | ApiErrors.BadRequest | ApiErrors.ServiceUnavailable | ApiErrors.Forbidden, R>(
  effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) =>
  Effect.catch(effect, (error: E) =>
    Effect.succeed(
      error instanceof ApiErrors.Unauthorized
        ? errorResponse(error, { "www-authenticate": 'Basic realm="Grove", charset="UTF-8"' })
        : errorResponse(error)
    ))

/**
 * The cached pack of main at `head`, built on first use. A caller who may not read some paths gets a
 * pack without those files, cached apart under the caller's view of the repository.
 */
const packOf = (repo: { id: string; orgId: string }, head: string, policy: Policy) =>
  Effect.gen(function*() {
    const cache = yield* GitPacks
    const objects = yield* ContentObjects
    const chunks = yield* ChunkStore
    const history = yield* History
    const stored = storedSnapshot(repo.orgId, objects, chunks)
    const source = policy.open ? stored : filteredSnapshot(stored, policy.canRead)
    const built = yield* cache.getOrBuild(policy.open ? head : `${head}-${policy.viewKey}`, (tmp) =>
      Effect.gen(function*() {
        const chain = yield* mainHistory(history, repo.id, head)
        const commits = policy.open ? chain : chain.map((c) => ({ ...c, manifest_hash: filteredRoot(c.manifest_hash) }))
        const result = yield* buildPack(source, commits, tmp)
        return { headSha: result.headSha, objectCount: result.objectCount }
      }))
    return built
  }).pipe(
    Effect.catch((error) =>
      Effect.logError("building the git pack failed", error).pipe(
        Effect.andThen(Effect.fail(new ApiErrors.ServiceUnavailable({ error: "the git snapshot could not be built; try again", code: "unavailable", retryable: true })))
      )
    )
  )

const decodeRepoName = Schema.decodeUnknownEffect(Schema.Struct({ name: ApiParams.RepoName }))

/**
 * `{owner}/{name}.git` in the route: the owner and the repository name without the suffix, both
 * checked before any lookup (a segment without `.git` is no git route: 404).
 */
const gitParams = routeParams({ owner: ApiParams.Slug, repo: Schema.String }).pipe(
  Effect.flatMap(({ owner, repo }) =>
    repo.endsWith(".git") && repo.length > 4
      ? decodeRepoName({ name: repo.slice(0, -4) }).pipe(
        Effect.mapError(invalidParams),
        Effect.map(({ name }) => ({ owner, name }))
      )
      : Effect.fail(new ApiErrors.NotFound({ error: "not found", code: "not_found" }))
  )
)

const downloadParams = routeParams(ApiParams.OwnerRepo)

const infoRefs = HttpRouter.add("GET", "/:owner/:repo/info/refs", gitResponse(Effect.gen(function*() {
  const { owner, name } = yield* gitParams
  const request = yield* HttpServerRequest.HttpServerRequest
  const service = new URL(request.url, "http://x").searchParams.get("service")
  if (service !== "git-upload-pack") {
    return yield* new ApiErrors.Forbidden({ error: "only git-upload-pack (clone and fetch) is served; push with grove", code: "forbidden" })
  }
  const { repo, head, policy } = yield* mainOf(yield* gitCaller, owner, name, true)
  const headSha = head === null ? null : (yield* packOf(repo, head, policy)).meta.headSha
  return HttpServerResponse.uint8Array(advertiseRefs(headSha), {
    contentType: ADVERTISEMENT_CONTENT_TYPE,
    headers: { "cache-control": "no-cache" }
  })
})))

const gitUploadPack = HttpRouter.add("POST", "/:owner/:repo/git-upload-pack", gitResponse(Effect.gen(function*() {
  const { owner, name } = yield* gitParams
  const { repo, head, policy } = yield* mainOf(yield* gitCaller, owner, name, true)
  const body = yield* readBody(8 * 1024 * 1024)
  const pack = head === null ? undefined : yield* packOf(repo, head, policy)
  const stream = yield* uploadPack(body, pack?.meta.headSha ?? null, pack === undefined ? { stream: Stream.empty } : { path: pack.path }).pipe(
    Effect.catchTag("UploadPackRequestError", (e) => Effect.fail(new ApiErrors.BadRequest({ error: e.message, code: "invalid_request" })))
  )
  return HttpServerResponse.stream(stream, { contentType: RESULT_CONTENT_TYPE, headers: { "cache-control": "no-cache" } })
})))

const download = HttpRouter.add("GET", "/:owner/:name/download", answer(Effect.gen(function*() {
  const params = yield* downloadParams
  const request = yield* HttpServerRequest.HttpServerRequest
  const identity = yield* Identity
  const caller = yield* callerOf(identity, request.headers["authorization"])
  const { repo, head, policy } = yield* mainOf(caller, params.owner, params.name, false)
  if (head === null) return yield* new ApiErrors.NotFound({ error: "main has no commits yet", code: "empty_repository" })
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore
  const commit = (yield* dbUnavailable(objects.loadCommitHeaders(repo.id, [head]))).get(head)
  if (commit === undefined) return yield* new ApiErrors.NotFound({ error: "main has no commits yet", code: "empty_repository" })
  const stored = storedSnapshot(repo.orgId, objects, chunks)
  const zip = (policy.open
    ? zipSnapshot(stored, commit.manifest_hash, { modified: commit.timestamp })
    : zipSnapshot(filteredSnapshot(stored, policy.canRead), filteredRoot(commit.manifest_hash), { modified: commit.timestamp })).pipe(
    Stream.tapError((e) => Effect.logError("zip export failed mid-stream", e))
  )
  return HttpServerResponse.stream(zip, {
    contentType: ZIP_CONTENT_TYPE,
    headers: {
      "content-disposition": `attachment; filename="${repo.name}-main.zip"`,
      etag: policy.open ? `"${head}"` : `"${head}-${policy.viewKey}"`
    }
  })
})))

/** The pack cache as a service: one per server, under the data directory. */
export class GitPacks extends Context.Service<GitPacks, PackCache>()("grove/server/site/GitPacks") {
  static readonly layer = Layer.effect(GitPacks, Effect.gen(function*() {
    const config = yield* ServerConfig
    return yield* PackCache.make({ dir: path.join(config.dataDir, "cache", "git") }).pipe(Effect.orDie)
  }))
}

export const ExportRoutes = Layer.mergeAll(infoRefs, gitUploadPack, download)
