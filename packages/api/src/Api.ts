import { HttpApi, OpenApi } from "effect/http-api"
import { AuditGroup } from "./AuditGroups.ts"
import { CiGroup } from "./CiGroups.ts"
import { WebhooksGroup } from "./WebhookGroups.ts"
import { groveShape } from "./ApiShape.ts"
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
  .pipe(groveShape)
  .annotateMerge(OpenApi.annotations({
    title: "Grove",
    description: "Self-hosted repository hosting. Errors are JSON: { error, code?, retryable? }.",
    transform: truthfulDocument
  }))
{}
