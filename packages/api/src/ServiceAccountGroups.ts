/**
 * Service accounts (`/orgs/{slug}/service-accounts/...`): an organization's non-human identities
 * and their scoped keys. Managing them needs the owner or admin role (and, for a key, the `admin`
 * scope). A key is shown once, at creation; listings show its prefix.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { BadRequest, Conflict, Forbidden, NotFound, OperationPending, ServiceUnavailable, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"

export const ServiceAccount = Schema.Struct({
  name: Schema.String,
  display_name: Schema.optionalKey(Schema.String),
  disabled: Schema.Boolean,
  /** Its organization. */
  organization: Schema.String,
  created_at: Schema.String
})
export type ServiceAccount = typeof ServiceAccount.Type

export const CreateServiceAccount = Schema.Struct({
  name: F.NewSlug,
  display_name: Schema.optionalKey(F.Text("display_name", 100))
})

export const UpdateServiceAccount = Schema.Struct({ disabled: Schema.Boolean })

export const ServiceAccountKey = Schema.Struct({
  key_id: Schema.String,
  name: Schema.String,
  /** Comma-separated: read, write, merge, admin, release. */
  scopes: Schema.String,
  /** The first characters of the key. */
  prefix: Schema.String,
  created_at: Schema.String,
  last_used_at: Schema.optionalKey(Schema.String)
})
export type ServiceAccountKey = typeof ServiceAccountKey.Type

const SCOPE = "(?:read|write|merge|admin|release)"
const SCOPES = new RegExp(`^${SCOPE}(?:,${SCOPE})*$`)

export const CreateServiceAccountKey = Schema.Struct({
  name: F.Text("name", 100),
  /** Comma-separated list of read, write, merge, admin, release (at least one). */
  scopes: P.make({
    check: (value) => SCOPES.test(value) ? { ok: true } : { ok: false, reason: "scopes must be a comma-separated list of read, write, merge, admin, release (at least one)" },
    description: "Comma-separated scopes: read, write, merge, admin, release (at least one).",
    pattern: SCOPES.source,
    minLength: 4,
    maxLength: 200,
    exact: false
  })
})

export const CreatedServiceAccountKey = Schema.Struct({ ...ServiceAccountKey.fields, key: Schema.String })

const Org = { slug: P.Slug }
const Account = { slug: P.Slug, name: P.Slug }
const ReadErrors = [BadRequest, Unauthorized, Forbidden, NotFound] as const
const WriteErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, OperationPending, ServiceUnavailable] as const

export class ServiceAccountsGroup extends HttpApiGroup.make("serviceAccounts").add(
  HttpApiEndpoint.get("list", "/orgs/:slug/service-accounts", { params: Org, query: F.Page, success: Schema.Struct({ service_accounts: Schema.Array(ServiceAccount) }), error: ReadErrors }),
  HttpApiEndpoint.post("create", "/orgs/:slug/service-accounts", {
    params: Org,
    payload: CreateServiceAccount,
    success: ServiceAccount.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.patch("update", "/orgs/:slug/service-accounts/:name", {
    params: Account,
    payload: UpdateServiceAccount,
    success: ServiceAccount,
    error: WriteErrors
  }),
  HttpApiEndpoint.delete("remove", "/orgs/:slug/service-accounts/:name", { params: Account, success: HttpApiSchema.NoContent, error: WriteErrors }),
  HttpApiEndpoint.get("keys", "/orgs/:slug/service-accounts/:name/keys", {
    params: Account,
    query: F.Page,
    success: Schema.Struct({ keys: Schema.Array(ServiceAccountKey) }),
    error: ReadErrors
  }),
  HttpApiEndpoint.post("createKey", "/orgs/:slug/service-accounts/:name/keys", {
    params: Account,
    payload: CreateServiceAccountKey,
    success: CreatedServiceAccountKey.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.delete("revokeKey", "/orgs/:slug/service-accounts/:name/keys/:key_id", {
    params: { ...Account, key_id: P.KeyId },
    success: HttpApiSchema.NoContent,
    error: WriteErrors
  })
) {}
