/**
 * Where sites are served: by path, `{site_url}/sites/<org>/…`, always; and by host, `<org>.<sites
 * domain>/…`, when `--sites-domain` is set (a global middleware, ahead of every other route: on a
 * site's host name nothing of the service answers, so the service's pages and API never share
 * the site's origin).
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { ServerConfig } from "../Config.ts"
import { plainNotFound, serveSite } from "./SiteFiles.ts"

// `/sites/<org>` itself routes here too (and is redirected to `/sites/<org>/`).
const byPath = HttpRouter.add("GET", "/sites/:org/*", Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const org = (yield* HttpRouter.params).org ?? ""
  const pathname = request.url.split("?")[0]!
  const base = `/sites/${org}`
  if (!SLUG.test(org) || !pathname.startsWith(base)) return plainNotFound()
  return yield* serveSite(org, pathname.slice(base.length), base)
}))

const SLUG = /^[a-z0-9][a-z0-9-]*$/i

/** The organization a Host header names under the sites domain (one label before it), if any. */
export const siteOfHost = (host: string | undefined, domain: string | undefined): string | undefined => {
  if (host === undefined || domain === undefined) return undefined
  const name = host.toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "")
  if (!name.endsWith(`.${domain}`)) return undefined
  const label = name.slice(0, -domain.length - 1)
  return /^[a-z0-9][a-z0-9-]*$/.test(label) ? label : undefined
}

const byHost = HttpRouter.middleware(Effect.gen(function*() {
  const config = yield* ServerConfig
  const context = yield* Effect.context<Exclude<Effect.Services<ReturnType<typeof serveSite>>, HttpServerRequest.HttpServerRequest>>()
  return (app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const org = siteOfHost(request.headers["host"], config.sitesDomain)
      if (org === undefined) return yield* app
      if (request.method !== "GET" && request.method !== "HEAD") {
        return HttpServerResponse.text("a site answers GET only\n", { status: 405, headers: { allow: "GET, HEAD" } })
      }
      return yield* serveSite(org, request.url.split("?")[0]!, "").pipe(Effect.provideContext(context))
    })
}), { global: true })

export const SiteServingRoutes = Layer.mergeAll(byPath, byHost)
