/**
 * The routes with large bodies (the push, a staged push, chunk uploads, `blobs/info`, proof pages:
 * `BodyLimits`' rules with an `access`) authenticate the caller and authorize the repository from
 * the path before a byte of the body is read. The JSON API decodes its payload before the handler
 * runs, so without this an anonymous 100 MB push to a repository that does not exist was read and
 * parsed before its 404. A caller who may not do it gets the answer the handler would give (400 for
 * a malformed path, 401, 403, 404, 503), with `Connection: close`: the server closes the connection
 * without draining the body. A caller who may goes on to the route, which checks again (from the caches).
 * A zstd body on any other repository route needs `read` first (`zstdBodyAccess`): no inflating for a 404.
 *
 * A global middleware placed after `MethodsLive` (405, and 401 for the operations that need a token,
 * come first) and `BodyLimitsLive` (413 from the Content-Length, 415).
 */
import { ApiErrors, ApiParams } from "@grove/api"
import { Effect, Result, Schema } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import { Identity } from "../access/Identity.ts"
import { callerOf } from "./Authentication.ts"
import { bodyAccess, pathnameOf, zstdBodyAccess } from "./BodyLimits.ts"
import { dbUnavailable } from "./Failures.ts"
import { invalidParams } from "./PathParams.ts"
import { errorResponse } from "./RawRoutes.ts"

const decodeOwnerRepo = Schema.decodeUnknownEffect(Schema.Struct(ApiParams.OwnerRepo))

const segment = (raw: string): string | undefined => {
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}

// Like BodyLimitsLive: a global middleware answers for every route, hence the widening cast.
export const AccessBeforeBodyLive = HttpRouter.middleware(Effect.gen(function*() {
  const identity = yield* Identity
  const authorizer = yield* Authorizer
  return (httpEffect) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const pathname = pathnameOf(request.url)
      const needed = bodyAccess(request.method, pathname) ?? zstdBodyAccess(request.method, pathname, request.headers["content-encoding"])
      if (needed === undefined) return yield* httpEffect
      const owner = segment(needed.owner)
      const name = segment(needed.name)
      const checked = yield* Effect.result(Effect.gen(function*() {
        if (owner === undefined || name === undefined) {
          return yield* new ApiErrors.BadRequest({ error: "invalid path: malformed percent-encoding", code: "invalid_input" })
        }
        const params = yield* decodeOwnerRepo({ owner, name }).pipe(Effect.mapError(invalidParams))
        const caller = yield* callerOf(identity, request.headers["authorization"])
        yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, needed.action))
      }))
      if (Result.isFailure(checked)) return errorResponse(checked.failure, { connection: "close" })
      return yield* httpEffect
    }) as unknown as typeof httpEffect
}), { global: true })
