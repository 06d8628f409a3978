/**
 * The sync protocol's JSON endpoints and the branch and content endpoints,
 * all under `/{owner}/{name}/`. Binary transfers (`PUT chunks/{hash}`,
 * `chunks/batch`, the framed chunk download, raw file bytes) are plain routes
 * in the server, outside this contract, because their bodies are streams.
 */
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import {
  BadRequest,
  Conflict,
  Forbidden,
  NotFound,
  OperationPending,
  PayloadTooLarge,
  PreconditionFailed,
  ServiceUnavailable,
  Unauthorized
} from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"
import * as PullCompact from "./PullCompact.ts"
import { OrgStorage } from "./Sync.ts"
import * as S from "./Sync.ts"

const Owner = P.OwnerRepo
const OwnerBranch = P.OwnerRepoBranch
const ReadErrors = [BadRequest, Unauthorized, Forbidden, NotFound, ServiceUnavailable] as const
const WriteErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, OperationPending, ServiceUnavailable] as const

/**
 * The sync protocol's bodies follow the public Oak client, which may send fields this version does
 * not know: they are ignored, and the document does not claim `additionalProperties: false` for them.
 */
export class SyncGroup extends HttpApiGroup.make("sync").add(
  HttpApiEndpoint.get("capabilities", "/capabilities", { success: S.Capabilities }),
  HttpApiEndpoint.post("push", "/:owner/:name/push", {
    params: Owner,
    payload: S.PushRequest,
    success: S.PushResponse,
    error: WriteErrors
  }),
  /** With `Accept: application/vnd.grove.pull-compact-v1+json`, Grove's compact answer (PullCompact.ts). */
  HttpApiEndpoint.get("pull", "/:owner/:name/pull", {
    params: Owner,
    query: S.PullQuery,
    success: [
      S.PullResponse.annotate({ description: "The sync protocol's pull answer (application/json), what every client but grove gets." }),
      PullCompact.CompactPullResponse.pipe(HttpApiSchema.asJson({ contentType: PullCompact.CONTENT_TYPE }))
    ],
    error: [...ReadErrors, Conflict, PreconditionFailed]
  }),
  HttpApiEndpoint.post("commitsInfo", "/:owner/:name/commits/info", {
    params: Owner,
    payload: S.CommitInfoRequest,
    success: S.CommitInfoResponse,
    error: ReadErrors
  }),
  HttpApiEndpoint.post("blobsCheck", "/:owner/:name/blobs/check", {
    params: Owner,
    payload: S.BlobCheckRequest,
    success: S.BlobCheckResponse,
    error: ReadErrors
  }),
  HttpApiEndpoint.post("blobsInfo", "/:owner/:name/blobs/info", {
    params: Owner,
    payload: S.BlobInfoRequest,
    success: S.BlobInfoResponse,
    error: ReadErrors
  }),
  HttpApiEndpoint.post("chunksCheck", "/:owner/:name/chunks/check", {
    params: Owner,
    payload: S.ChunkCheckRequest,
    success: S.ChunkCheckResponse,
    error: [...ReadErrors, PayloadTooLarge]
  }),
  HttpApiEndpoint.post("chunksDownload", "/:owner/:name/chunks/download", {
    params: Owner,
    payload: S.ChunkDownloadRequest,
    success: S.ChunkDownloadResponse,
    error: ReadErrors
  }),
  HttpApiEndpoint.post("chunksUploaded", "/:owner/:name/chunks/uploaded", {
    params: Owner,
    payload: S.ChunkUploadedRequest,
    success: S.Confirmation,
    error: ReadErrors
  })
).annotate(HttpApi.PayloadParseOptions, {}) {}

export class BranchesGroup extends HttpApiGroup.make("branches").add(
  HttpApiEndpoint.get("list", "/:owner/:name/branches", {
    params: Owner,
    query: { status: Schema.optionalKey(Schema.Literals(["open", "closed", "merged"])), ...F.Page },
    success: S.BranchList,
    error: ReadErrors
  }),
  HttpApiEndpoint.post("create", "/:owner/:name/branches", {
    params: Owner,
    payload: S.CreateBranch,
    success: S.Branch.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.get("get", "/:owner/:name/branches/:branch", {
    params: OwnerBranch,
    query: { record_read: Schema.optionalKey(Schema.String) },
    success: S.Branch,
    error: ReadErrors
  }),
  HttpApiEndpoint.post("close", "/:owner/:name/branches/:branch/close", {
    params: OwnerBranch,
    success: S.Branch,
    error: WriteErrors
  }),
  HttpApiEndpoint.post("reopen", "/:owner/:name/branches/:branch/reopen", {
    params: OwnerBranch,
    success: S.Branch,
    error: WriteErrors
  }),
  HttpApiEndpoint.post("rename", "/:owner/:name/branches/:branch/rename", {
    params: OwnerBranch,
    success: S.Branch,
    error: [...WriteErrors]
  })
) {}

export class ContentGroup extends HttpApiGroup.make("content").add(
  /** The root listing (`tree/{commit}`) and subdirectories (`tree/{commit}/{path}`): the wildcard also matches nothing. */
  HttpApiEndpoint.get("tree", "/:owner/:name/tree/:commit/*", {
    params: { ...Owner, commit: P.CommitRef, "*": Schema.optionalKey(P.RepoPath) },
    success: S.TreeListing,
    error: ReadErrors
  }),
  HttpApiEndpoint.get("orgStorage", "/orgs/:slug/storage", {
    params: { slug: P.Slug },
    success: OrgStorage,
    error: ReadErrors
  })
) {}
