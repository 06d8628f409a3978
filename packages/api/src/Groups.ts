/**
 * The HTTP contract, grouped like the spec's tables. Paths are relative to
 * `{base_url}` = `{site_url}/api`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { BadRequest, Conflict, Forbidden, NotFound, OperationPending, ServiceUnavailable, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"
import * as S from "./Schemas.ts"

const Owner = P.OwnerRepo

export class SystemGroup extends HttpApiGroup.make("system").add(
  HttpApiEndpoint.get("version", "/version", { success: S.Version }),
  /** Readiness of this node: 503 while it cannot serve (database unreachable, a partition stuck or without a worker). */
  HttpApiEndpoint.get("health", "/health", { success: S.Health, error: [ServiceUnavailable] }),
  HttpApiEndpoint.get("whoami", "/whoami", { success: S.Whoami, error: [Unauthorized, Forbidden] }),
  HttpApiEndpoint.get("operation", "/operations/:id", {
    params: { id: P.OperationId },
    success: S.Operation,
    error: [Unauthorized, NotFound]
  })
) {}

export class ApiKeysGroup extends HttpApiGroup.make("apiKeys").add(
  HttpApiEndpoint.get("list", "/api-keys", { query: F.Page, success: Schema.Struct({ api_keys: Schema.Array(S.ApiKey) }), error: [BadRequest, Unauthorized, Forbidden] }),
  HttpApiEndpoint.post("create", "/api-keys", {
    payload: S.CreateApiKey,
    success: S.CreatedApiKey.pipe(HttpApiSchema.status(201)),
    error: [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, OperationPending, ServiceUnavailable]
  }),
  HttpApiEndpoint.delete("revoke", "/api-keys/:id", {
    params: { id: P.KeyId },
    success: HttpApiSchema.NoContent,
    error: [Unauthorized, Forbidden, NotFound, Conflict, OperationPending, ServiceUnavailable]
  })
) {}

const WriteErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, OperationPending, ServiceUnavailable] as const

export class ReposGroup extends HttpApiGroup.make("repos").add(
  HttpApiEndpoint.get("list", "/repos", {
    query: { sort: Schema.optionalKey(S.RepoSort), ...F.Page },
    success: Schema.Struct({ repos: Schema.Array(S.Repository) }),
    error: [BadRequest, Unauthorized, Forbidden]
  }),
  HttpApiEndpoint.post("create", "/repos", {
    payload: S.CreateRepository,
    success: S.Repository.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.get("get", "/:owner/:name", { params: Owner, success: S.Repository, error: [Unauthorized, Forbidden, NotFound] }),
  HttpApiEndpoint.delete("delete", "/:owner/:name", {
    params: Owner,
    success: HttpApiSchema.NoContent,
    error: WriteErrors
  }),
  HttpApiEndpoint.patch("setVisibility", "/:owner/:name/visibility", {
    params: Owner,
    payload: S.SetVisibility,
    success: S.Repository,
    error: WriteErrors
  }),
  HttpApiEndpoint.post("transfer", "/:owner/:name/transfer", {
    params: Owner,
    payload: S.Transfer,
    success: S.Repository,
    error: WriteErrors
  }),
  HttpApiEndpoint.get("size", "/:owner/:name/size", {
    params: Owner,
    success: S.RepositorySize,
    error: [Unauthorized, Forbidden, NotFound]
  })
) {}

/** The headless half of `grove login`: a one-time code shown by the sign-in page, exchanged for a session. */
export class CliAuthGroup extends HttpApiGroup.make("cliAuth").add(
  HttpApiEndpoint.post("exchange", "/cli-auth/exchange", {
    payload: S.CliCodeExchange,
    success: S.CliToken,
    error: [BadRequest, NotFound]
  })
) {}
