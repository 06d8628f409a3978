/**
 * The code pages: `{site_url}/{owner}/{name}` (main's tree, the README, clone hints; JSON for a client
 * that asks for it, as `GET /api/{owner}/{name}` answers), directories, a file with highlighting, and
 * its raw bytes or download for the signed-in browser. Reads go through `FileReads` (the API's path
 * permissions) and the Authorizer, so a hidden repository and a withheld file are "not found" here too.
 */
import { ApiErrors } from "@grove/api"
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Repositories } from "../access/Repositories.ts"
import { toApiRepository } from "../access/RepositoryRecord.ts"
import { ServerConfig } from "../Config.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { answer, requestCaller, routeRepository } from "../http/RawRoutes.ts"
import { highlightBlob } from "../web/Highlight.ts"
import { layout } from "../web/Layout.ts"
import { htmlResponse, notUnderApi, pageRoute, wantsJson } from "../web/Page.ts"
import { formatSize, html, shortHash } from "../web/Render.ts"
import { repoCrumbs, repoHeader } from "../web/RepoFrame.ts"
import type { PageSession } from "../web/Session.ts"
import { blobsByHash, type FileAt, fileBytes, fileStream, pathAt } from "./FileReads.ts"
import { contentTypeOf } from "./FileRoutes.ts"
import { blobHref, cloneHints, directoryTable, fileBody, rawHref, readmeOf, readmeView, SHOW_MAX_BYTES, shownText, treeHref } from "./FileViews.ts"

const MAIN = "main"

/** The route's path after the ref, and the ref itself. */
const refAndPath = Effect.map(HttpRouter.params, (params) => ({ ref: params.ref ?? MAIN, path: params["*"] ?? "" }))

/** Path crumbs below the repository: each directory links to its listing, the last is the current page. */
const pathCrumbs = (repo: Parameters<typeof treeHref>[0], ref: string, path: string) => {
  const parts = path === "" ? [] : path.split("/")
  return [
    { label: ref.length > 40 ? shortHash(ref) : ref, href: treeHref(repo, ref, "") },
    ...parts.map((part, i) => ({ label: part, href: treeHref(repo, ref, parts.slice(0, i + 1).join("/")) }))
  ]
}

const repositoryPage = (session: PageSession) =>
  Effect.gen(function*() {
    const { repo } = yield* routeRepository("read", session.caller)
    const repositories = yield* Repositories
    const config = yield* ServerConfig
    // An empty repository has no main yet: its page says how to fill it.
    const [usage, listing] = yield* Effect.all([
      dbUnavailable(repositories.usage(repo.id)),
      pathAt(session.caller, repo, MAIN, "").pipe(Effect.catchIf((e) => e instanceof ApiErrors.NotFound, () => Effect.succeed(undefined)))
    ], { concurrency: 2 })
    const size = Option.match(usage, { onNone: () => 0, onSome: (u) => u.sizeBytes })
    const directory = listing?.kind === "tree" ? listing : undefined
    // The listing left out what the caller may not read, so the README it names is readable: read it by its hash.
    const readme = directory === undefined ? undefined : readmeOf(directory.entries)
    const readmeBytes = readme === undefined ? undefined : (yield* blobsByHash(repo.orgId, [readme.hash], SHOW_MAX_BYTES)).get(readme.hash)
    return yield* htmlResponse(layout({
      title: `${repo.owner}/${repo.name}`,
      session,
      crumbs: repoCrumbs(repo),
      body: html`${repoHeader(repo, "code", html`<span>${formatSize(size)}</span>${
        directory === undefined ? null : html`<span>main at <span class="mono">${shortHash(directory.commit.hash)}</span></span>`
      }`)}
${
        directory === undefined
          ? html`<p class="notice">This repository is empty. Push to it with <code>grove push</code>.</p>`
          : directoryTable(repo, MAIN, directory.entries, "Files on main")
      }
${readme !== undefined && readmeBytes !== undefined ? readmeView(readme, readmeBytes) : null}
${cloneHints(repo, config.siteUrl)}`
    }))
  })

/** A client asking for JSON gets what `GET /api/{owner}/{name}` answers, authorized by its bearer token. */
const repositoryJson = answer(Effect.gen(function*() {
  const caller = yield* requestCaller
  const { repo } = yield* routeRepository("read", caller)
  const repositories = yield* Repositories
  const fresh = yield* dbUnavailable(repositories.findById(repo.id))
  if (Option.isNone(fresh)) return yield* new ApiErrors.NotFound({ error: `repository ${repo.owner}/${repo.name} not found`, code: "not_found" })
  return HttpServerResponse.jsonUnsafe(toApiRepository(fresh.value), { headers: { vary: "accept", "cache-control": "private, no-cache" } })
}))

const repository = HttpRouter.add("GET", "/:owner/:name", Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  yield* notUnderApi
  return yield* (wantsJson(request) ? repositoryJson : pageRoute(repositoryPage))
}))

const tree = HttpRouter.add("GET", "/:owner/:name/tree/:ref/*", pageRoute((session) =>
  Effect.gen(function*() {
    const { repo } = yield* routeRepository("read", session.caller)
    const { ref, path } = yield* refAndPath
    const found = yield* pathAt(session.caller, repo, ref, path)
    if (found.kind === "blob") return HttpServerResponse.redirect(blobHref(repo, ref, found.path), { status: 302 })
    return yield* htmlResponse(layout({
      title: `${found.path === "" ? "" : `${found.path} · `}${repo.owner}/${repo.name}`,
      session,
      crumbs: repoCrumbs(repo, pathCrumbs(repo, ref, found.path)),
      body: html`${repoHeader(repo, "code")}${directoryTable(repo, ref, found.entries, `Files in ${found.path === "" ? "the root" : found.path}`)}`
    }))
  })
))

const blob = HttpRouter.add("GET", "/:owner/:name/blob/:ref/*", pageRoute((session) =>
  Effect.gen(function*() {
    const { repo } = yield* routeRepository("read", session.caller)
    const { ref, path } = yield* refAndPath
    const found = yield* pathAt(session.caller, repo, ref, path)
    if (found.kind === "tree") return HttpServerResponse.redirect(treeHref(repo, ref, found.path), { status: 302 })
    const bytes = found.size <= SHOW_MAX_BYTES ? yield* fileBytes(repo, found) : undefined
    const text = shownText(bytes)
    const highlighted = text === undefined ? undefined : yield* highlightBlob(found.hash, text, found.path)
    const name = found.path.slice(found.path.lastIndexOf("/") + 1)
    return yield* htmlResponse(layout({
      title: `${found.path} · ${repo.owner}/${repo.name}`,
      session,
      crumbs: repoCrumbs(repo, pathCrumbs(repo, ref, found.path)),
      body: html`${repoHeader(repo, "code")}
<section class="box" aria-labelledby="file-title"><header><h2 id="file-title">${name}</h2><span class="muted">${formatSize(found.size)}</span>
<span class="spacer"></span><a href=${rawHref(repo, ref, found.path)}>Raw</a><a href=${`${rawHref(repo, ref, found.path)}?download=1`}>Download</a></header>
${fileBody(found.path, found.size, bytes, text, highlighted)}</section>`
    }))
  })
))

/** The bytes for the browser (the API's raw route wants a bearer token, which a link cannot carry). */
const rawFile = (repo: Parameters<typeof fileStream>[0], file: FileAt, download: boolean) =>
  Effect.map(fileStream(repo, file), (body) => {
    const name = file.path.slice(file.path.lastIndexOf("/") + 1)
    return HttpServerResponse.stream(body, {
      contentType: download ? "application/octet-stream" : contentTypeOf(file.path),
      contentLength: file.size,
      headers: {
        "x-content-type-options": "nosniff",
        "content-security-policy": "sandbox",
        "cache-control": "private, no-cache",
        etag: `"${file.hash}"`,
        ...(download ? { "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(name)}` } : {})
      }
    })
  })

const raw = HttpRouter.add("GET", "/:owner/:name/raw/:ref/*", pageRoute((session) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { repo } = yield* routeRepository("read", session.caller)
    const { ref, path } = yield* refAndPath
    const found = yield* pathAt(session.caller, repo, ref, path)
    if (found.kind === "tree") return yield* new ApiErrors.NotFound({ error: "not a file", code: "path_not_found" })
    return yield* rawFile(repo, found, new URL(request.url, "http://x").searchParams.get("download") === "1")
  })
))

export const FilePages = Layer.mergeAll(repository, tree, blob, raw)
