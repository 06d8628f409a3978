/**
 * Site settings, under `{base_url}` as the spec lists them: `GET/PUT/DELETE /orgs/{slug}/site` and
 * `GET /sites`. The record is the one the Oak client reads: `{organization_slug, repo_name, branch,
 * source_dir, url, created_at, updated_at}`. A published site's settings are public (the Oak client
 * reads them without a token and takes 404 as "no site"); an unpublished one (its repository is
 * private) only its organization's members see. Changes need the owner or admin role (a member gets
 * 403, a non-member 404) and are Organization commands (sites/SiteCommands.ts).
 */
import { ApiErrors, type Caller, CurrentCaller } from "@grove/api"
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import { ServerConfig } from "../Config.ts"
import { pathSegments } from "../content/CommitPaths.ts"
import { actorOf, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable, gatewayApiError, isGatewayFailure } from "../http/Failures.ts"
import { answer, readBody, requestCaller } from "../http/RawRoutes.ts"
import { type SiteError, siteApiError } from "./SiteErrors.ts"
import { SiteGateway } from "./SiteGateway.ts"
import { type Site, Sites, siteUrl } from "./Sites.ts"
import type { GatewayFailure } from "../entities/Sending.ts"

const toRecord = (config: ServerConfig["Service"], site: { readonly organization_slug: string; readonly repo_name: string; readonly source_dir: string; readonly created_at: string; readonly updated_at: string }) => ({
  organization_slug: site.organization_slug,
  repo_name: site.repo_name,
  branch: "main",
  source_dir: site.source_dir === "" ? "/" : `/${site.source_dir}`,
  url: siteUrl(config, site.organization_slug),
  created_at: site.created_at,
  updated_at: site.updated_at
})

const recordOf = (config: ServerConfig["Service"], site: Site) =>
  toRecord(config, {
    organization_slug: site.orgSlug,
    repo_name: site.repoName,
    source_dir: site.sourceDir,
    created_at: site.createdAt.toISOString(),
    updated_at: site.updatedAt.toISOString()
  })

const slugParam = Effect.map(HttpRouter.params, (params) => params.slug ?? "")

const noSite = (slug: string) => new ApiErrors.NotFound({ error: `organization ${slug.slice(0, 100)} has no site`, code: "not_found" })

const invalid = (error: string) => new ApiErrors.BadRequest({ error, code: "invalid_input" })

/** The PUT body: `repo` (a name, or `org/name` of this organization), `source_dir?` inside the repository, `branch?` = main. */
export const parseSettings = (slug: string, text: string) =>
  Effect.gen(function*() {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return yield* invalid("the body must be a JSON object")
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) return yield* invalid("the body must be a JSON object")
    const { repo, source_dir, branch, ...rest } = body as Record<string, unknown>
    const extra = Object.keys(rest)[0]
    if (extra !== undefined) return yield* invalid(`unknown field '${extra.slice(0, 50)}'`)
    if (typeof repo !== "string" || repo === "") return yield* invalid("'repo' is required: the repository to publish")
    const [owner, name] = repo.includes("/") ? repo.split("/", 2) as [string, string] : [slug, repo]
    if (owner.toLowerCase() !== slug.toLowerCase() || name === "" || repo.split("/").length > 2) {
      return yield* invalid(`'repo' must be a repository of ${slug.slice(0, 100)}`)
    }
    if (branch !== undefined && branch !== "main") return yield* invalid("a site serves 'main'; 'branch' may only be main")
    if (source_dir !== undefined && typeof source_dir !== "string") return yield* invalid("'source_dir' must be a string")
    // Every segment must be a tree entry name (no `..`, no `.`, no control characters): it cannot climb out.
    const segments = pathSegments(source_dir ?? "")
    if (!segments.ok) return yield* invalid(`'source_dir': ${segments.reason}`)
    return { repoName: name, sourceDir: segments.segments.join("/") }
  })

const commandFailure = (error: SiteError | GatewayFailure) => Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : siteApiError(error))

/** The organization, for a caller who may manage it (403 for a member, 404 for a non-member). */
const managed = Effect.gen(function*() {
  const slug = yield* slugParam
  const caller = yield* requestCaller
  const org = yield* dbUnavailable((yield* Authorizer).organization(caller, slug, "admin"))
  return { org, caller }
})

/** The command's actor fields and write request (an Idempotency-Key replays), for a raw route's caller. */
const sender = (caller: Caller) =>
  Effect.all({ actor: actorOf(caller), request: commandRequest }).pipe(Effect.provideService(CurrentCaller, caller))

const getSite = HttpRouter.add("GET", "/api/orgs/:slug/site", answer(Effect.gen(function*() {
  const slug = yield* slugParam
  const caller = yield* requestCaller
  const site = yield* dbUnavailable((yield* Sites).find(slug))
  if (site === undefined) return yield* noSite(slug)
  if (!site.isPublic) {
    // Unpublished: only those who can read the organization learn that it exists.
    yield* (yield* Authorizer).organization(caller, slug, "read").pipe(dbUnavailable, Effect.mapError(() => noSite(slug)))
  }
  return HttpServerResponse.jsonUnsafe(recordOf(yield* ServerConfig, site))
})))

const putSite = HttpRouter.add("PUT", "/api/orgs/:slug/site", answer(Effect.gen(function*() {
  const { org, caller } = yield* managed
  const settings = yield* parseSettings(org.slug, new TextDecoder().decode(yield* readBody(64 * 1024)))
  const gateway = yield* SiteGateway
  const { actor, request } = yield* sender(caller)
  const saved = yield* gateway.set(org.slug, { ...settings, ...actor }, request).pipe(Effect.catch(commandFailure))
  return HttpServerResponse.jsonUnsafe(toRecord(yield* ServerConfig, saved))
})))

const deleteSite = HttpRouter.add("DELETE", "/api/orgs/:slug/site", answer(Effect.gen(function*() {
  const { org, caller } = yield* managed
  const gateway = yield* SiteGateway
  const { actor, request } = yield* sender(caller)
  yield* gateway.remove(org.slug, actor, request).pipe(Effect.catch(commandFailure))
  return HttpServerResponse.empty({ status: 204 })
})))

const listSites = HttpRouter.add("GET", "/api/sites", answer(Effect.gen(function*() {
  const caller = yield* requestCaller
  const sites = yield* dbUnavailable((yield* Sites).listVisible(caller.principal))
  const config = yield* ServerConfig
  return HttpServerResponse.jsonUnsafe({ sites: sites.map((site) => recordOf(config, site)) })
})))

export const SiteSettingsRoutes = Layer.mergeAll(getSite, putSite, deleteSite, listSites)
