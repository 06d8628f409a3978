import { HttpApi, OpenApi } from "effect/http-api"
import { AuditGroup } from "./AuditGroups.ts"
import { CiGroup } from "./CiGroups.ts"
import { WebhooksGroup } from "./WebhookGroups.ts"
import { Authentication, RequestValidation } from "./Authentication.ts"
import { ApiKeysGroup, CliAuthGroup, ReposGroup, SystemGroup } from "./Groups.ts"
import { MergesGroup } from "./MergeGroups.ts"
import { OrgsGroup } from "./OrgGroups.ts"
import { PathPermissionsGroup } from "./PathPermissionGroups.ts"
import { ServiceAccountsGroup } from "./ServiceAccountGroups.ts"
import { truthfulDocument } from "./OpenApiDocument.ts"
import { IntegrityGroup } from "./IntegrityGroups.ts"
import { StagedPushGroup } from "./StagedPushGroups.ts"
import { BranchesGroup, ContentGroup, SyncGroup } from "./SyncGroups.ts"

export class GroveApi extends HttpApi.make("grove")
  .add(SystemGroup)
  .add(ApiKeysGroup)
  .add(OrgsGroup)
  .add(CliAuthGroup)
  .add(SyncGroup)
  .add(StagedPushGroup)
  .add(IntegrityGroup)
  .add(BranchesGroup)
  .add(MergesGroup)
  .add(ContentGroup)
  .add(AuditGroup)
  .add(ServiceAccountsGroup)
  .add(PathPermissionsGroup)
  .add(CiGroup)
  .add(WebhooksGroup)
  // The catch-all `/:owner/:name` routes go last.
  .add(ReposGroup)
  // A middleware added later wraps the ones before it: path parameters are checked first,
  // before the token is looked up, so a malformed path never reaches the database.
  .middleware(Authentication)
  .middleware(RequestValidation)
  .prefix("/api")
  // A body with a property the schema does not declare is refused (400), as the document's
  // `additionalProperties: false` says; the sync protocol's group opts out (see SyncGroup).
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error" })
  .annotateMerge(OpenApi.annotations({
    title: "Grove",
    description: "Self-hosted repository hosting. Errors are JSON: { error, code?, retryable? }.",
    transform: truthfulDocument
  }))
{}
