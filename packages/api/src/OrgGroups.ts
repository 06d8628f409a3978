/**
 * Organizations, their members and groups (`/orgs/...`). Managing members and groups needs the
 * owner or admin role; only an owner grants, changes or removes the owner role.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { BadRequest, Conflict, Forbidden, NotFound, OperationPending, ServiceUnavailable, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"
import * as S from "./Schemas.ts"

export const Member = Schema.Struct({
  username: Schema.String,
  role: S.Role,
  /** When they joined (ISO 8601, UTC). */
  created_at: Schema.String
})
export type Member = typeof Member.Type

export const Group = Schema.Struct({
  slug: Schema.String,
  description: Schema.optionalKey(Schema.String),
  /** User names, sorted. */
  members: Schema.Array(Schema.String),
  created_at: Schema.String
})
export type Group = typeof Group.Type

export const UpdateOrganization = Schema.Struct({
  name: Schema.optionalKey(F.Text("organization name", 100)),
  /** null clears it. */
  description: Schema.optionalKey(Schema.NullOr(F.Multiline("description", 2000)))
})

export const AddMember = Schema.Struct({
  username: P.Slug,
  /** Default `member`. */
  role: Schema.optionalKey(S.Role)
})

export const SetRole = Schema.Struct({ role: S.Role })

export const CreateGroup = Schema.Struct({
  slug: F.NewSlug,
  description: Schema.optionalKey(F.Multiline("description", 2000))
})

export const AddGroupMember = Schema.Struct({ username: P.Slug })

export const SetQuota = Schema.Struct({
  /** Bytes of storage the organization may use. */
  quota_bytes: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))
})

export const Quota = Schema.Struct({ slug: Schema.String, quota_bytes: Schema.Number })

const Org = { slug: P.Slug }
const OrgMember = { slug: P.Slug, username: P.Slug }
const OrgGroup = { slug: P.Slug, group: P.Slug }
const ReadErrors = [BadRequest, Unauthorized, Forbidden, NotFound] as const
const WriteErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, OperationPending, ServiceUnavailable] as const

export class OrgsGroup extends HttpApiGroup.make("orgs").add(
  HttpApiEndpoint.get("list", "/orgs", { query: F.Page, success: Schema.Struct({ organizations: Schema.Array(S.Organization) }), error: [BadRequest, Unauthorized, Forbidden] }),
  HttpApiEndpoint.post("create", "/orgs", {
    payload: S.CreateOrganization,
    success: S.Organization.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.get("get", "/orgs/:slug", { params: Org, success: S.Organization, error: [Unauthorized, Forbidden, NotFound] }),
  HttpApiEndpoint.patch("update", "/orgs/:slug", { params: Org, payload: UpdateOrganization, success: S.Organization, error: WriteErrors }),
  /** Refused (409) while repositories remain, and for personal organizations. The slug may be taken again afterwards. */
  HttpApiEndpoint.delete("remove", "/orgs/:slug", { params: Org, success: HttpApiSchema.NoContent, error: WriteErrors }),
  HttpApiEndpoint.get("members", "/orgs/:slug/members", { params: Org, query: F.Page, success: Schema.Struct({ members: Schema.Array(Member) }), error: ReadErrors }),
  HttpApiEndpoint.post("addMember", "/orgs/:slug/members", {
    params: Org,
    payload: AddMember,
    success: Member.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.patch("setRole", "/orgs/:slug/members/:username", { params: OrgMember, payload: SetRole, success: Member, error: WriteErrors }),
  HttpApiEndpoint.delete("removeMember", "/orgs/:slug/members/:username", {
    params: OrgMember,
    success: HttpApiSchema.NoContent,
    error: WriteErrors
  }),
  HttpApiEndpoint.get("groups", "/orgs/:slug/groups", { params: Org, query: F.Page, success: Schema.Struct({ groups: Schema.Array(Group) }), error: ReadErrors }),
  HttpApiEndpoint.post("createGroup", "/orgs/:slug/groups", {
    params: Org,
    payload: CreateGroup,
    success: Group.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.delete("deleteGroup", "/orgs/:slug/groups/:group", { params: OrgGroup, success: HttpApiSchema.NoContent, error: WriteErrors }),
  HttpApiEndpoint.post("addGroupMember", "/orgs/:slug/groups/:group/members", {
    params: OrgGroup,
    payload: AddGroupMember,
    success: Group,
    error: WriteErrors
  }),
  HttpApiEndpoint.delete("removeGroupMember", "/orgs/:slug/groups/:group/members/:username", {
    params: { ...OrgGroup, username: P.Slug },
    success: HttpApiSchema.NoContent,
    error: WriteErrors
  }),
  /** Instance admins only (others: 404 if they cannot see the organization, else 403). */
  HttpApiEndpoint.put("setQuota", "/orgs/:slug/quota", { params: Org, payload: SetQuota, success: Quota, error: WriteErrors })
) {}
