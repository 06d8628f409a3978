/**
 * Checks made before routing, from the API's route table:
 * - A method a path does not support answers 405 `{ error, code: "method_not_allowed" }` with an
 *   `Allow` header naming the methods it does (RFC 9110); `TRACE` answers 405 everywhere. The most
 *   specific routes of a path decide (`/api/orgs/{slug}` over `/api/{owner}/{name}`: the first
 *   segments of the API's own paths are reserved slugs, so they never name a repository). Paths no
 *   route knows stay 404.
 * - An operation the OpenAPI document says needs a token (`TOKEN_REQUIRED`) answers 401 without an
 *   `Authorization` header, before its body is checked (a chunked body on a small route has been read by
 *   then, up to the route's limit: `BodyLimits.ts` wraps this middleware).
 */
import { GroveApi, TOKEN_REQUIRED } from "@grove/api"
import { Effect } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { HttpServerResponse as Response } from "effect/http"
import { OAK_CLIENT_ROUTES } from "./OakClientRoutes.ts"
import { pathnameOf } from "./BodyLimits.ts"

interface Route {
  readonly method: string
  readonly pattern: RegExp
  /** Per segment: 2 static, 1 parameter, 0 the trailing wildcard; compared left to right. */
  readonly rank: ReadonlyArray<number>
  readonly operationId?: string
}

const route = (method: string, path: string, operationId?: string): Route => {
  const segments = path.split("/").slice(1)
  const parts = segments.map((part) =>
    part === "*" ? "(?:/.*)?" : `/${part.startsWith(":") ? "[^/]+" : part.replace(/[.]/g, "\\.")}`
  )
  const rank = segments.map((part) => part === "*" ? 0 : part.startsWith(":") ? 1 : 2)
  return { method, pattern: new RegExp(`^${parts.join("")}$`), rank, ...(operationId === undefined ? {} : { operationId }) }
}

const compareRank = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number => {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const difference = (a[i] ?? -1) - (b[i] ?? -1)
    if (difference !== 0) return difference
  }
  return 0
}

/** The JSON API's routes and the binary routes beside it (`ChunkRoutes`, `FileRoutes`). */
const ROUTES: ReadonlyArray<Route> = [
  ...Object.values(GroveApi.groups).flatMap((group) =>
    Object.values(group.endpoints).map((endpoint) =>
      route(endpoint.method, endpoint.path, `${group.identifier}.${endpoint.identifier}`)
    )
  ),
  route("GET", "/api/openapi.json"),
  route("PUT", "/api/:owner/:name/chunks/:hash"),
  route("POST", "/api/:owner/:name/chunks/batch"),
  route("POST", "/api/:owner/:name/chunks/fetch"),
  route("GET", "/api/:owner/:name/chunks/fetch/:hash"),
  route("GET", "/api/:owner/:name/raw/:commit/*"),
  route("GET", "/api/:owner/:name/ci/runs/:id/logs"),
  route("GET", "/api/:owner/:name/events"),
  // Client releases (releases/ReleaseRoutes.ts).
  route("GET", "/api/releases"),
  route("GET", "/api/releases/latest"),
  route("GET", "/api/releases/:version/:platform"),
  route("PUT", "/api/releases/:version/:platform"),
  route("GET", "/api/releases/:version/:platform/sha256"),
  route("GET", "/api/releases/:version/:platform/minisig"),
  // Organization sites (sites/SiteRoutes.ts).
  route("GET", "/api/orgs/:slug/site"),
  route("PUT", "/api/orgs/:slug/site"),
  route("DELETE", "/api/orgs/:slug/site"),
  route("GET", "/api/sites"),
  ...OAK_CLIENT_ROUTES.map(([method, path]) => route(method, path))
]

/** The most specific routes matching a path (all with the same rank); empty for a path no route knows. */
const routesOf = (pathname: string): ReadonlyArray<Route> => {
  // A scan tests every route's pattern (~150): a path seen lately (a hot read's) is answered from memory.
  const known = matched.get(pathname)
  if (known !== undefined) return known
  const routes = scanRoutes(pathname)
  // Bounded: at most 4,096 paths of at most 256 characters.
  if (pathname.length > 256) return routes
  if (matched.size >= 4096) matched.clear()
  matched.set(pathname, routes)
  return routes
}
const matched = new Map<string, ReadonlyArray<Route>>()

const scanRoutes = (pathname: string): ReadonlyArray<Route> => {
  let best: Array<Route> = []
  for (const candidate of ROUTES) {
    if (!candidate.pattern.test(pathname)) continue
    const order = best.length === 0 ? 1 : compareRank(candidate.rank, best[0]!.rank)
    if (order > 0) best = [candidate]
    else if (order === 0) best.push(candidate)
  }
  return best
}

/** The methods of a path's routes (`routesOf`), in a stable order; empty for a path no route knows. */
const allowedMethods = (routes: ReadonlyArray<Route>): ReadonlyArray<string> => {
  const methods = new Set(routes.map((r) => r.method))
  if (methods.has("GET")) methods.add("HEAD")
  return ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"].filter((method) => methods.has(method))
}

// These answers are made before any other middleware runs, so they carry JSON's nosniff themselves.
const unauthenticated = () =>
  Response.jsonUnsafe({ error: "sign in required", code: "unauthenticated" }, {
    status: 401,
    headers: { "x-content-type-options": "nosniff" }
  })

export const methodNotAllowed = (method: string, allow: ReadonlyArray<string>) =>
  Response.jsonUnsafe({ error: `method ${method.slice(0, 20)} is not allowed here`, code: "method_not_allowed" }, {
    status: 405,
    headers: allow.length === 0 ? { "x-content-type-options": "nosniff" } : { allow: allow.join(", "), "x-content-type-options": "nosniff" }
  })

// Like JsonErrorsLive: a global middleware answers for every route, hence the widening cast.
export const MethodsLive = HttpRouter.middleware((httpEffect) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const pathname = pathnameOf(request.url)
    if (request.method === "TRACE") return methodNotAllowed(request.method, allowedMethods(routesOf(pathname)))
    if (pathname.startsWith("/api/")) {
      // One scan of the route table per request: the Allow list and the token check share it.
      const routes = routesOf(pathname)
      const allow = allowedMethods(routes)
      if (allow.length > 0 && !allow.includes(request.method)) return methodNotAllowed(request.method, allow)
      const authorization = request.headers["authorization"]
      if (authorization === undefined || authorization === "") {
        const target = routes.find((r) => r.method === request.method)
        if (target?.operationId !== undefined && TOKEN_REQUIRED.has(target.operationId)) return unauthenticated()
      }
    }
    return yield* httpEffect
  }) as unknown as typeof httpEffect, { global: true })
