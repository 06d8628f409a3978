/**
 * The HTTP application: the JSON API under `/api`, the sign-in page, and JSON
 * errors for everything else. Infrastructure (database, bus, entity runtime)
 * is provided by `main.ts` according to the mode.
 */
import { GroveApi } from "@grove/api"
import { Layer } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "./access/Authorizer.ts"
import { ApiKeysHandlers } from "./http/ApiKeysHandlers.ts"
import { AuthenticationLive, RequestValidationLive } from "./http/Authentication.ts"
import { CliAuthHandlers } from "./http/CliAuthHandlers.ts"
import { JsonErrorsLive } from "./http/JsonErrors.ts"
import { OrgsHandlers } from "./http/OrgsHandlers.ts"
import { ReposHandlers } from "./http/ReposHandlers.ts"
import { SystemHandlers } from "./http/SystemHandlers.ts"
import { Identity } from "./identity/Identity.ts"
import { Organizations } from "./orgs/Organizations.ts"
import { Repositories } from "./repos/Repositories.ts"
import { CliAuthPageRoutes } from "./site/CliAuthPage.ts"
import { HomePage } from "./site/HomePage.ts"
import { SignInThrottle } from "./site/SignInThrottle.ts"

/** Domain services over the database (reads, identity, access). */
export const DomainLive = Authorizer.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(Identity.layer, Organizations.layer, Repositories.layer, SignInThrottle.layer))
)

const ApiRoutes = HttpApiBuilder.layer(GroveApi, { openapiPath: "/api/openapi.json" }).pipe(
  Layer.provide([SystemHandlers, ApiKeysHandlers, OrgsHandlers, ReposHandlers, CliAuthHandlers]),
  Layer.provide([AuthenticationLive, RequestValidationLive])
)

export const Routes = Layer.mergeAll(ApiRoutes, CliAuthPageRoutes, HomePage, JsonErrorsLive)

export const HttpAppLive = HttpRouter.serve(Routes, { disableLogger: true, disableListenLog: true })
