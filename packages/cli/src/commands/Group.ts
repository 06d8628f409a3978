/**
 * `grove group list|create|delete|add|remove --org ORG`: an organization's groups
 * (`/api/orgs/{slug}/groups/...`), the principals `.oak/PERMISSIONS` names as `@org/group`. Members
 * read them; owners and admins change them (a member gets the server's 403, exit 1).
 */
import { Effect, Option } from "effect"
import { connect } from "../Client.ts"
import { Output, table } from "../Output.ts"
import { slugArg } from "./Org.ts"

interface Target {
  readonly org: string
  readonly group: string
}

const target = (input: Target) => Effect.all({ slug: slugArg(input.org, "organization"), group: slugArg(input.group, "group") })

export const list = Effect.fn("Group.list")(function*(remote: string, input: { readonly org: string }) {
  const out = yield* Output
  const slug = yield* slugArg(input.org, "organization")
  const { call, client } = yield* connect(remote)
  const groups = yield* call(client.orgs.groups({ params: { slug }, query: {} }))
  yield* out.result(groups, () =>
    groups.groups.length === 0
      ? `${slug} has no groups: grove group create NAME --org ${slug}`
      : table(["GROUP", "MEMBERS", "DESCRIPTION"], groups.groups.map((g) => [`@${slug}/${g.slug}`, g.members.join(", "), g.description ?? ""])))
})

export const create = Effect.fn("Group.create")(function*(remote: string, input: Target & { readonly description: Option.Option<string> }) {
  const out = yield* Output
  const { slug, group } = yield* target(input)
  const { call, client } = yield* connect(remote)
  const created = yield* call(client.orgs.createGroup({
    params: { slug },
    payload: { slug: group, ...Option.match(input.description, { onNone: () => ({}), onSome: (description) => ({ description }) }) }
  }))
  yield* out.result(created, () => `Created group @${slug}/${created.slug}. Add members with grove group add ${created.slug} USER --org ${slug}`)
})

export const remove = Effect.fn("Group.remove")(function*(remote: string, input: Target) {
  const out = yield* Output
  const { slug, group } = yield* target(input)
  const { call, client } = yield* connect(remote)
  yield* call(client.orgs.deleteGroup({ params: { slug, group } }))
  yield* out.result({ deleted: group, organization: slug }, () => `Deleted group @${slug}/${group}.`)
})

export const addMember = Effect.fn("Group.addMember")(function*(remote: string, input: Target & { readonly username: string }) {
  const out = yield* Output
  const { slug, group } = yield* target(input)
  const username = yield* slugArg(input.username, "user name")
  const { call, client } = yield* connect(remote)
  const updated = yield* call(client.orgs.addGroupMember({ params: { slug, group }, payload: { username } }))
  yield* out.result(updated, () => `Added ${username} to @${slug}/${group} (members: ${updated.members.join(", ")}).`)
})

export const removeMember = Effect.fn("Group.removeMember")(function*(remote: string, input: Target & { readonly username: string }) {
  const out = yield* Output
  const { slug, group } = yield* target(input)
  const username = yield* slugArg(input.username, "user name")
  const { call, client } = yield* connect(remote)
  yield* call(client.orgs.removeGroupMember({ params: { slug, group, username } }))
  yield* out.result({ removed: username, group, organization: slug }, () => `Removed ${username} from @${slug}/${group}.`)
})
