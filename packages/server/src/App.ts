/**
 * The HTTP application: the JSON API under `/api`, the sign-in page, and JSON
 * errors for everything else. Infrastructure (database, bus, entity runtime)
 * is provided by `main.ts` according to the mode.
 */
import { ApiParams, GroveApi } from "@grove/api"
import { Layer } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "./access/Authorizer.ts"
import { AuditHandlers } from "./audit/AuditHandlers.ts"
import { AuditLog } from "./audit/AuditLog.ts"
import { AccessCaches } from "./cache/AccessCaches.ts"
import { CiHandlers } from "./ci/CiHandlers.ts"
import { CiLogRoutes } from "./ci/CiLogRoutes.ts"
import { CiLogStore } from "./ci/CiLogStore.ts"
import { CiWake } from "./ci/CiWake.ts"
import { CiRuns } from "./ci/CiRuns.ts"
import { SecretBox } from "./ci/CiSecrets.ts"
import { Egress } from "./egress/Egress.ts"
import { EventRoutes } from "./events/EventRoutes.ts"
import { OakClientRoutes } from "./http/OakClientRoutes.ts"
import { RepositoryEventStream } from "./events/RepositoryEventStream.ts"
import { Webhooks } from "./webhooks/Webhooks.ts"
import { WebhooksHandlers } from "./webhooks/WebhooksHandlers.ts"
import { Branches } from "./content/Branches.ts"
import { ChunkStore } from "./content/ChunkStore.ts"
import { CommitPaths } from "./content/CommitPaths.ts"
import { ContentObjects } from "./content/ContentObjects.ts"
import { History } from "./content/History.ts"
import { ApiKeysHandlers } from "./identity/ApiKeysHandlers.ts"
import { BranchesHandlers } from "./branches/BranchesHandlers.ts"
import { ChunkRoutes } from "./sync/ChunkRoutes.ts"
import { ContentHandlers } from "./files/ContentHandlers.ts"
import { FileRoutes } from "./files/FileRoutes.ts"
import { MergeHandlers } from "./merges/MergeHandlers.ts"
import { SyncHandlers } from "./sync/SyncHandlers.ts"
import { BlobProofs } from "./staged-push/BlobProofs.ts"
import { ChunkLinks } from "./sync/ChunkLinks.ts"
import { IntegrityHandlers } from "./integrity/IntegrityHandlers.ts"
import { IntegrityProof } from "./integrity/IntegrityProof.ts"
import { PushStages } from "./staged-push/PushStages.ts"
import { StagedPushHandlers } from "./staged-push/StagedPushHandlers.ts"
import { AuthenticationLive, RequestValidationLive } from "./http/Authentication.ts"
import { CliAuthHandlers } from "./identity/CliAuthHandlers.ts"
import { AccessBeforeBodyLive } from "./http/AccessBeforeBody.ts"
import { BodyLimitsLive } from "./http/BodyLimits.ts"
import { JsonErrorsLive } from "./http/JsonErrors.ts"
import { ResponseCompressionLive } from "./http/ContentEncoding.ts"
import { MethodsLive } from "./http/Methods.ts"
import { OrgsHandlers } from "./orgs/OrgsHandlers.ts"
import { ReposHandlers } from "./repos/ReposHandlers.ts"
import { SystemHandlers } from "./system/SystemHandlers.ts"
import { Identity } from "./access/Identity.ts"
import { Organizations } from "./access/Organizations.ts"
import { PathPermissions } from "./path-permissions/PathPermissions.ts"
import { PathPermissionsHandlers } from "./path-permissions/PathPermissionsHandlers.ts"
import { Repositories } from "./access/Repositories.ts"
import { ServiceAccounts } from "./service-accounts/ServiceAccounts.ts"
import { ServiceAccountsHandlers } from "./service-accounts/ServiceAccountsHandlers.ts"
import { CliAuthPageRoutes } from "./web/CliAuthPage.ts"
import { ExportRoutes, GitPacks } from "./files/ExportRoutes.ts"
import { HomePage } from "./web/HomePage.ts"
import { AssetRoutes } from "./web/Assets.ts"
import { SignInPages } from "./web/SignInPage.ts"
import { BranchPages } from "./branches/BranchPages.ts"
import { CommitPages } from "./branches/CommitPages.ts"
import { CiPages } from "./ci/CiPages.ts"
import { FilePages } from "./files/FilePages.ts"
import { KeyPages } from "./identity/KeyPages.ts"
import { OrgPages } from "./orgs/OrgPages.ts"
import { OrgPeoplePages } from "./orgs/OrgPeoplePages.ts"
import { ServiceAccountPages } from "./service-accounts/ServiceAccountPages.ts"
import { WebhookPages } from "./webhooks/WebhookPages.ts"
import { CiSecretPages } from "./ci/CiSecretPages.ts"
import { AuditPages } from "./audit/AuditPages.ts"
import { SecurityHeadersLive } from "./web/SecurityHeaders.ts"
import { OpsRoutes } from "./ops/OpsRoutes.ts"
import { RequestLogLive, RouteNoteLive } from "./ops/RequestLog.ts"
import { SignInThrottle } from "./web/SignInThrottle.ts"
import { ReleaseRoutes } from "./releases/ReleaseRoutes.ts"
import { Releases } from "./releases/Releases.ts"
import { SiteSettingsRoutes } from "./sites/SiteRoutes.ts"
import { SiteServingRoutes } from "./sites/SiteServing.ts"
import { PlanningTrees } from "./merges/PlanningTrees.ts"
import { Sites } from "./sites/Sites.ts"
import { ReleaseSigner } from "./releases/ReleaseSigner.ts"

/** Content reads and object storage (trees, blobs, chunks, commits, branches). */
export const ContentLive = Layer.mergeAll(History.layer, CommitPaths.layer, PlanningTrees.layer).pipe(
  Layer.provideMerge(Layer.mergeAll(ContentObjects.layer, ChunkStore.layer, Branches.layer))
)

/** Domain services over the database (reads, identity, access, content). */
export const DomainLive = Layer.mergeAll(
  Authorizer.layer,
  PathPermissions.layer,
  GitPacks.layer,
  AuditLog.layer,
  ServiceAccounts.layer,
  CiRuns.layer.pipe(Layer.provide(SecretBox.layer)),
  SecretBox.layer,
  CiLogStore.layer,
  CiWake.layer,
  Webhooks.layer,
  Egress.layer,
  RepositoryEventStream.layer,
  PushStages.layer,
  BlobProofs.layer,
  ChunkLinks.layer.pipe(Layer.provide(SecretBox.layer)),
  IntegrityProof.layer,
  Releases.layer,
  ReleaseSigner.layer,
  Sites.orgSites.pipe(Layer.provideMerge(Sites.layer))
).pipe(
  Layer.provideMerge(ContentLive),
  Layer.provideMerge(Layer.mergeAll(Identity.layer, Organizations.layer, Repositories.layer, SignInThrottle.layer)),
  Layer.provideMerge(AccessCaches.layer)
)

const ApiRoutes = HttpApiBuilder.layer(GroveApi, { openapiPath: "/api/openapi.json" }).pipe(
  Layer.provide([
    SystemHandlers,
    ApiKeysHandlers,
    OrgsHandlers,
    ReposHandlers,
    CliAuthHandlers,
    SyncHandlers,
    StagedPushHandlers,
    IntegrityHandlers,
    BranchesHandlers,
    ContentHandlers,
    MergeHandlers,
    AuditHandlers,
    ServiceAccountsHandlers,
    PathPermissionsHandlers,
    CiHandlers,
    WebhooksHandlers
  ]),
  Layer.provide([AuthenticationLive, RequestValidationLive])
)

// Global middleware added first wraps the rest: the security headers go on every response, even one
// another global middleware answers without routing (405, 413, 415, an early 401).
// Then JSON errors, then, before routing, each route's body limit (413, 415) and unsupported
// methods and missing tokens (405, 401), then, for the routes with large bodies, the caller's access (AccessBeforeBody).
export const Routes = Layer.mergeAll(
  // First, so it times and logs each request as a whole, whichever middleware answers it.
  RequestLogLive,
  SecurityHeadersLive,
  OpsRoutes,
  ApiRoutes,
  ChunkRoutes,
  FileRoutes,
  CiLogRoutes,
  EventRoutes,
  OakClientRoutes,
  ExportRoutes,
  ReleaseRoutes,
  SiteSettingsRoutes,
  SiteServingRoutes,
  CliAuthPageRoutes,
  HomePage,
  SignInPages,
  AssetRoutes,
  FilePages,
  BranchPages,
  CommitPages,
  CiPages,
  KeyPages,
  OrgPages,
  OrgPeoplePages,
  ServiceAccountPages,
  WebhookPages,
  CiSecretPages,
  AuditPages,
  // Outside the JSON errors: large JSON answers go zstd to callers that accept it.
  ResponseCompressionLive,
  JsonErrorsLive,
  BodyLimitsLive,
  MethodsLive,
  AccessBeforeBodyLive,
  // Last: innermost, around the router itself (the route template for the access log and the metrics).
  RouteNoteLive
)

export const HttpAppLive = HttpRouter.serve(Routes, {
  disableLogger: true,
  disableListenLog: true,
  // The router's default (100) would make branch names of 101-255 characters unreachable.
  routerConfig: { maxParamLength: ApiParams.MAX_SEGMENT }
})
