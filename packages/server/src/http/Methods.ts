/**
 * A method a path does not support answers 405 `{ error, code: "method_not_allowed" }` with an
 * `Allow` header naming the methods it does (RFC 9110), before routing; `TRACE` answers 405
 * everywhere. Paths no route knows stay 404.
 */
import { GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { HttpServerResponse as Response } from "effect/http"

interface Route {
  readonly method: string
  readonly pattern: RegExp
}

const toPattern = (path: string): RegExp => {
  const parts = path.split("/").map((part) =>
    part === "*" ? "(?:/.*)?" : `/${part.startsWith(":") ? "[^/]+" : part.replace(/[.]/g, "\\.")}`
  )
  return new RegExp(`^${parts.slice(1).join("")}$`)
}

const apiRoutes: ReadonlyArray<Route> = Object.values(GroveApi.groups).flatMap((group) =>
  Object.values(group.endpoints).map((endpoint) => ({ method: endpoint.method, pattern: toPattern(endpoint.path) }))
)

/** The JSON API's routes and the binary routes beside it (`ChunkRoutes`, `FileRoutes`). */
const ROUTES: ReadonlyArray<Route> = [
  ...apiRoutes,
  { method: "GET", pattern: toPattern("/api/openapi.json") },
  { method: "PUT", pattern: toPattern("/api/:owner/:name/chunks/:hash") },
  { method: "POST", pattern: toPattern("/api/:owner/:name/chunks/batch") },
  { method: "POST", pattern: toPattern("/api/:owner/:name/chunks/fetch") },
  { method: "GET", pattern: toPattern("/api/:owner/:name/raw/:commit/*") }
]

/** The methods the API answers on a path, in a stable order; empty for a path no route knows. */
export const allowedMethods = (pathname: string): ReadonlyArray<string> => {
  const methods = new Set<string>()
  for (const route of ROUTES) if (route.pattern.test(pathname)) methods.add(route.method)
  if (methods.has("GET")) methods.add("HEAD")
  return ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"].filter((method) => methods.has(method))
}

export const methodNotAllowed = (method: string, allow: ReadonlyArray<string>) =>
  Response.jsonUnsafe({ error: `method ${method.slice(0, 20)} is not allowed here`, code: "method_not_allowed" }, {
    status: 405,
    headers: allow.length === 0 ? {} : { allow: allow.join(", ") }
  })

// Like JsonErrorsLive: a global middleware answers for every route, hence the widening cast.
export const MethodsLive = HttpRouter.middleware((httpEffect) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const query = request.url.indexOf("?")
    const pathname = query === -1 ? request.url : request.url.slice(0, query)
    if (request.method === "TRACE") return methodNotAllowed(request.method, allowedMethods(pathname))
    if (pathname.startsWith("/api/")) {
      const allow = allowedMethods(pathname)
      if (allow.length > 0 && !allow.includes(request.method)) return methodNotAllowed(request.method, allow)
    }
    return yield* httpEffect
  }) as unknown as typeof httpEffect, { global: true })
