/**
 * How every group of `GroveApi` is served and called: behind its two middlewares, under `/api`, refusing a body's
 * undeclared properties. Api.ts builds `GroveApi` with it from all the groups; the client builds one group's API with
 * it from that group alone (cli Client.ts: a command evaluates the definitions of the groups it calls, not all 16).
 */
import type { HttpApiGroup } from "effect/http-api"
import { HttpApi } from "effect/http-api"
import { Authentication, RequestValidation } from "./Authentication.ts"

export const groveShape = <Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<"grove", Groups>) =>
  api
    // A middleware added later wraps the ones before it: path parameters are checked first,
    // before the token is looked up, so a malformed path never reaches the database.
    .middleware(Authentication)
    .middleware(RequestValidation)
    .prefix("/api")
    // A body with a property the schema does not declare is refused (400), as the document's
    // `additionalProperties: false` says; the sync protocol's group opts out (see SyncGroup).
    .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error" })
