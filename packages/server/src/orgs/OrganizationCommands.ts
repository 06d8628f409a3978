/**
 * The Organization entity's own commands (key: the organization's slug): the organization itself,
 * its members and groups, and its quota. Each runs in the entity runtime's command transaction:
 * it locks the organization's row, changes what it must, bumps the row's version with a
 * compare-and-set on the version it read, and writes an audit row and an outbox event.
 * Who may call which command is checked at the edge (owner or admin); what depends on rows the
 * command reads (the caller's own role for owner changes, the count of owners) is checked here.
 */
import { ApiOrgs, ApiSchemas } from "@grove/api"
import type { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { Actor, type ActorFields, Done, lockOrg, type OrgRow, record } from "./OrganizationCommandSupport.ts"
import { toApiOrganization } from "../access/Organizations.ts"
import {
  AlreadyInGroup,
  AlreadyMember,
  GroupGone,
  GroupTaken,
  LastOwner,
  NotInGroup,
  NotMember,
  OrganizationError,
  OrgChanged,
  OrgNameTaken,
  OrgNotEmpty,
  OwnerRequired,
  PersonalOrganization,
  UserUnknown
} from "./OrganizationErrors.ts"

export const CreatePayload = Schema.Struct({
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  ...Actor
})
export const UpdatePayload = Schema.Struct({
  name: Schema.optionalKey(Schema.String),
  description: Schema.optionalKey(Schema.NullOr(Schema.String)),
  ...Actor
})
export const DeletePayload = Schema.Struct({ ...Actor })
export const AddMemberPayload = Schema.Struct({ username: Schema.String, role: ApiSchemas.Role, ...Actor })
export const SetRolePayload = Schema.Struct({ username: Schema.String, role: ApiSchemas.Role, ...Actor })
export const RemoveMemberPayload = Schema.Struct({ username: Schema.String, ...Actor })
export const CreateGroupPayload = Schema.Struct({ group: Schema.String, description: Schema.NullOr(Schema.String), ...Actor })
export const DeleteGroupPayload = Schema.Struct({ group: Schema.String, ...Actor })
export const GroupMemberPayload = Schema.Struct({ group: Schema.String, username: Schema.String, ...Actor })
export const SetQuotaPayload = Schema.Struct({ quotaBytes: Schema.Number, ...Actor })


/** The compare-and-set every change makes on the organization's version. */
const bump = Effect.fnUntraced(function*(org: OrgRow) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`UPDATE organizations SET version = version + 1 WHERE id = ${org.id} AND version = ${org.version} RETURNING id`
  if (rows.length === 0) return yield* new OrgChanged({ slug: org.slug })
})

const roleOf = Effect.fnUntraced(function*(orgId: string, userId: string | null) {
  if (userId === null) return undefined
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ role: ApiSchemas.Organization["role"] & string }>`
    SELECT role FROM memberships WHERE org_id = ${orgId} AND user_id = ${userId}`
  return rows[0]?.role
})

/** Owner changes need an owner (an instance admin counts as one), as the database says now. */
const requireOwner = Effect.fnUntraced(function*(org: OrgRow, payload: ActorFields) {
  if (payload.actorSiteAdmin) return
  if ((yield* roleOf(org.id, payload.actorUserId)) !== "owner") return yield* new OwnerRequired()
})

const ownerCount = Effect.fnUntraced(function*(orgId: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM memberships WHERE org_id = ${orgId} AND role = 'owner'`
  return rows[0]!.n
})

interface MemberRow {
  readonly userId: string
  readonly username: string
  readonly role: "member" | "admin" | "owner"
  readonly createdAt: Date
}

const memberOf = Effect.fnUntraced(function*(orgId: string, username: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<MemberRow>`SELECT u.id AS "userId", u.username, m.role, m.created_at AS "createdAt"
    FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = ${orgId} AND u.username = ${username} FOR UPDATE OF m`
  return rows[0]
})

const toApiMember = (row: MemberRow): ApiOrgs.Member => ({
  username: row.username,
  role: row.role,
  created_at: row.createdAt.toISOString()
})

interface GroupRow {
  readonly id: string
  readonly slug: string
  readonly description: string | null
  readonly createdAt: Date
}

const groupOf = Effect.fnUntraced(function*(orgId: string, group: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<GroupRow>`SELECT id, slug, description, created_at AS "createdAt"
    FROM org_groups WHERE org_id = ${orgId} AND slug = ${group} FOR UPDATE`
  const row = rows[0]
  if (row === undefined) return yield* new GroupGone({ group })
  return row
})

const toApiGroup = Effect.fnUntraced(function*(row: GroupRow) {
  const sql = yield* SqlClient.SqlClient
  const members = yield* sql<{ username: string }>`SELECT u.username FROM group_members g JOIN users u ON u.id = g.user_id
    WHERE g.group_id = ${row.id} ORDER BY u.username`
  return {
    slug: row.slug,
    ...(row.description === null ? {} : { description: row.description }),
    members: members.map((m) => m.username),
    created_at: row.createdAt.toISOString()
  } satisfies ApiOrgs.Group
})

const isUniqueViolation = (error: unknown) => error instanceof SqlError && error.reason._tag === "UniqueViolation"

export const create = Effect.fn("Organization.create")(function*(
  payload: typeof CreatePayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  if (payload.actorUserId === null) return yield* new OwnerRequired()
  const id = randomUUID()
  // A savepoint keeps the command transaction usable when the unique index refuses the slug.
  const inserted = yield* sql.withTransaction(
    sql`INSERT INTO organizations ${sql.insert({ id, slug: entityId, name: payload.name, description: payload.description })}`
  ).pipe(Effect.as(true), Effect.catch((error) => isUniqueViolation(error) ? Effect.succeed(false) : Effect.fail(error)))
  if (!inserted) return yield* new OrgNameTaken({ slug: entityId })
  yield* sql`INSERT INTO memberships ${sql.insert({ org_id: id, user_id: payload.actorUserId, role: "owner" })}`
  const org = yield* lockOrg(entityId)
  yield* record(org, payload, { action: "org.create", event: "organization.created" })
  return toApiOrganization(org, "owner")
})

export const update = Effect.fn("Organization.update")(function*(
  payload: typeof UpdatePayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  yield* bump(org)
  const name = payload.name ?? org.name
  const description = payload.description === undefined ? org.description : payload.description
  yield* sql`UPDATE organizations SET name = ${name}, description = ${description} WHERE id = ${org.id}`
  yield* record(org, payload, {
    action: "org.update",
    event: "organization.updated",
    details: { ...(payload.name === undefined ? {} : { name }), ...(payload.description === undefined ? {} : { description_changed: true }) }
  })
  return toApiOrganization({ ...org, name, description }, (yield* roleOf(org.id, payload.actorUserId)) ?? undefined)
})

export const remove = Effect.fn("Organization.delete")(function*(
  payload: typeof DeletePayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  if (org.personal) return yield* new PersonalOrganization({ slug: org.slug, what: "it goes with its user" })
  const repositories = yield* sql<{ name: string }>`SELECT name FROM repositories WHERE org_id = ${org.id} ORDER BY lower(name) LIMIT 100`
  if (repositories.length > 0) {
    return yield* new OrgNotEmpty({ slug: org.slug, repositories: repositories.map((r) => `${org.slug}/${r.name}`) })
  }
  yield* record(org, payload, { action: "org.delete", event: "organization.deleted" })
  const rows = yield* sql`DELETE FROM organizations WHERE id = ${org.id} AND version = ${org.version} RETURNING id`
  if (rows.length === 0) return yield* new OrgChanged({ slug: org.slug })
  return { slug: org.slug }
})

export const addMember = Effect.fn("Organization.addMember")(function*(
  payload: typeof AddMemberPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  if (org.personal) return yield* new PersonalOrganization({ slug: org.slug, what: "it has no other members" })
  if (payload.role === "owner") yield* requireOwner(org, payload)
  const users = yield* sql<{ id: string }>`SELECT id FROM users WHERE username = ${payload.username}`
  const user = users[0]
  if (user === undefined) return yield* new UserUnknown({ username: payload.username })
  if ((yield* memberOf(org.id, payload.username)) !== undefined) return yield* new AlreadyMember({ username: payload.username })
  yield* bump(org)
  yield* sql`INSERT INTO memberships ${sql.insert({ org_id: org.id, user_id: user.id, role: payload.role })}`
  yield* record(org, payload, {
    action: "member.add",
    event: "organization.member_added",
    target: payload.username,
    details: { username: payload.username, role: payload.role }
  })
  return toApiMember((yield* memberOf(org.id, payload.username))!)
})

export const setRole = Effect.fn("Organization.setRole")(function*(
  payload: typeof SetRolePayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const member = yield* memberOf(org.id, payload.username)
  if (member === undefined) return yield* new NotMember({ username: payload.username })
  if (member.role === payload.role) return toApiMember(member)
  if (member.role === "owner" || payload.role === "owner") yield* requireOwner(org, payload)
  if (member.role === "owner" && (yield* ownerCount(org.id)) <= 1) return yield* new LastOwner({ slug: org.slug })
  yield* bump(org)
  yield* sql`UPDATE memberships SET role = ${payload.role} WHERE org_id = ${org.id} AND user_id = ${member.userId}`
  yield* record(org, payload, {
    action: "member.role",
    event: "organization.member_role_changed",
    target: payload.username,
    details: { username: payload.username, from: member.role, role: payload.role }
  })
  return toApiMember({ ...member, role: payload.role })
})

export const removeMember = Effect.fn("Organization.removeMember")(function*(
  payload: typeof RemoveMemberPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const member = yield* memberOf(org.id, payload.username)
  if (member === undefined) return yield* new NotMember({ username: payload.username })
  if (member.role === "owner") {
    yield* requireOwner(org, payload)
    if ((yield* ownerCount(org.id)) <= 1) return yield* new LastOwner({ slug: org.slug })
  }
  yield* bump(org)
  yield* sql`DELETE FROM group_members WHERE user_id = ${member.userId}
    AND group_id IN (SELECT id FROM org_groups WHERE org_id = ${org.id})`
  yield* sql`DELETE FROM memberships WHERE org_id = ${org.id} AND user_id = ${member.userId}`
  yield* record(org, payload, {
    action: "member.remove",
    event: "organization.member_removed",
    target: payload.username,
    details: { username: payload.username, role: member.role }
  })
  return { slug: org.slug }
})

export const createGroup = Effect.fn("Organization.createGroup")(function*(
  payload: typeof CreateGroupPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const existing = yield* sql`SELECT id FROM org_groups WHERE org_id = ${org.id} AND slug = ${payload.group}`
  if (existing.length > 0) return yield* new GroupTaken({ group: payload.group })
  yield* bump(org)
  yield* sql`INSERT INTO org_groups ${sql.insert({ id: randomUUID(), org_id: org.id, slug: payload.group, description: payload.description })}`
  yield* record(org, payload, {
    action: "group.create",
    event: "organization.group_created",
    target: `${org.slug}/${payload.group}`,
    details: { group: payload.group }
  })
  return yield* toApiGroup(yield* groupOf(org.id, payload.group))
})

export const deleteGroup = Effect.fn("Organization.deleteGroup")(function*(
  payload: typeof DeleteGroupPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const group = yield* groupOf(org.id, payload.group)
  yield* bump(org)
  yield* sql`DELETE FROM org_groups WHERE id = ${group.id}`
  yield* record(org, payload, {
    action: "group.delete",
    event: "organization.group_deleted",
    target: `${org.slug}/${payload.group}`,
    details: { group: payload.group }
  })
  return { slug: org.slug }
})

export const addGroupMember = Effect.fn("Organization.addGroupMember")(function*(
  payload: typeof GroupMemberPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const group = yield* groupOf(org.id, payload.group)
  // A group holds members of its organization only.
  const member = yield* memberOf(org.id, payload.username)
  if (member === undefined) return yield* new NotMember({ username: payload.username })
  const present = yield* sql`SELECT 1 FROM group_members WHERE group_id = ${group.id} AND user_id = ${member.userId}`
  if (present.length > 0) return yield* new AlreadyInGroup({ group: payload.group, username: payload.username })
  yield* bump(org)
  yield* sql`INSERT INTO group_members ${sql.insert({ group_id: group.id, user_id: member.userId })}`
  yield* record(org, payload, {
    action: "group.member.add",
    event: "organization.group_member_added",
    target: `${org.slug}/${payload.group}`,
    details: { group: payload.group, username: payload.username }
  })
  return yield* toApiGroup(group)
})

export const removeGroupMember = Effect.fn("Organization.removeGroupMember")(function*(
  payload: typeof GroupMemberPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const group = yield* groupOf(org.id, payload.group)
  yield* bump(org)
  const rows = yield* sql`DELETE FROM group_members WHERE group_id = ${group.id}
    AND user_id = (SELECT id FROM users WHERE username = ${payload.username}) RETURNING user_id`
  if (rows.length === 0) return yield* new NotInGroup({ group: payload.group, username: payload.username })
  yield* record(org, payload, {
    action: "group.member.remove",
    event: "organization.group_member_removed",
    target: `${org.slug}/${payload.group}`,
    details: { group: payload.group, username: payload.username }
  })
  return { slug: org.slug }
})

export const setQuota = Effect.fn("Organization.setQuota")(function*(
  payload: typeof SetQuotaPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  yield* bump(org)
  yield* sql`UPDATE organizations SET quota_bytes = ${payload.quotaBytes}, quota_custom = true WHERE id = ${org.id}`
  yield* record(org, payload, { action: "org.quota", event: "organization.quota_set", details: { quota_bytes: payload.quotaBytes } })
  return { slug: org.slug, quota_bytes: payload.quotaBytes }
})

const command = <P extends Schema.Top, S extends Schema.Top>(payload: P, success: S) => ({ payload, success, error: OrganizationError })

export const commands = {
  Create: command(CreatePayload, ApiSchemas.Organization),
  Update: command(UpdatePayload, ApiSchemas.Organization),
  Delete: command(DeletePayload, Done),
  AddMember: command(AddMemberPayload, ApiOrgs.Member),
  SetRole: command(SetRolePayload, ApiOrgs.Member),
  RemoveMember: command(RemoveMemberPayload, Done),
  CreateGroup: command(CreateGroupPayload, ApiOrgs.Group),
  DeleteGroup: command(DeleteGroupPayload, Done),
  AddGroupMember: command(GroupMemberPayload, ApiOrgs.Group),
  RemoveGroupMember: command(GroupMemberPayload, Done),
  SetQuota: command(SetQuotaPayload, ApiOrgs.Quota)
} satisfies Record<string, Entity.CommandSchemas>

export const handlers: Entity.Handlers<Entity.Entity<"Organization", typeof commands>> = {
  Create: create,
  Update: update,
  Delete: remove,
  AddMember: addMember,
  SetRole: setRole,
  RemoveMember: removeMember,
  CreateGroup: createGroup,
  DeleteGroup: deleteGroup,
  AddGroupMember: addGroupMember,
  RemoveGroupMember: removeGroupMember,
  SetQuota: setQuota
}
