/**
 * `grove org list|create|show|members|add|remove|role`: organizations and their members
 * (`/api/orgs/...`). The server decides who may do what: a member managing members gets its 403
 * (exit 1), a non-member its 404 (exit 1); names are checked here first (exit 2).
 */
import { Names } from "@grove/core"
import { Effect, Option } from "effect"
import { connect } from "../Client.ts"
import { usage } from "../Failures.ts"
import { Output, table } from "../Output.ts"

export type Role = "member" | "admin" | "owner"

/** A slug given on the command line, or a usage error (exit 2). */
export const slugArg = (value: string, what: string) => {
  const check = Names.checkSlugFormat(value, what)
  return check.ok ? Effect.succeed(value) : Effect.fail(usage(`invalid ${what}: ${check.reason}`))
}

export const list = Effect.fn("Org.list")(function*(remote: string) {
  const out = yield* Output
  const { call, client } = yield* connect(remote)
  const listed = yield* call(client.orgs.list({ query: {} }))
  yield* out.result(listed, () =>
    table(["ORG", "NAME", "YOUR ROLE", "CREATED"], listed.organizations.map((o) => [o.slug, `${o.name}${o.personal ? " (personal)" : ""}`, o.role ?? "", o.created_at])))
})

export const create = Effect.fn("Org.create")(function*(remote: string, input: {
  readonly slug: string
  readonly name: Option.Option<string>
  readonly description: Option.Option<string>
}) {
  const out = yield* Output
  const slug = yield* slugArg(input.slug, "organization")
  const { call, client } = yield* connect(remote)
  const org = yield* call(client.orgs.create({
    payload: {
      slug,
      name: Option.getOrElse(input.name, () => slug),
      ...Option.match(input.description, { onNone: () => ({}), onSome: (description) => ({ description }) })
    }
  }))
  yield* out.result(org, () => `Created organization ${org.slug} (you are its owner).`)
})

export const show = Effect.fn("Org.show")(function*(remote: string, input: { readonly slug: string }) {
  const out = yield* Output
  const slug = yield* slugArg(input.slug, "organization")
  const { call, client } = yield* connect(remote)
  const org = yield* call(client.orgs.get({ params: { slug } }))
  yield* out.result(org, () =>
    [`${org.slug}: ${org.name}${org.personal ? " (personal)" : ""}`, ...(org.description === undefined ? [] : [org.description]), ...(org.role === undefined ? [] : [`your role: ${org.role}`])]
      .join("\n"))
})

export const members = Effect.fn("Org.members")(function*(remote: string, input: { readonly slug: string }) {
  const out = yield* Output
  const slug = yield* slugArg(input.slug, "organization")
  const { call, client } = yield* connect(remote)
  const list = yield* call(client.orgs.members({ params: { slug }, query: {} }))
  yield* out.result(list, () => table(["USER", "ROLE", "SINCE"], list.members.map((m) => [m.username, m.role, m.created_at])))
})

export const add = Effect.fn("Org.add")(function*(remote: string, input: { readonly slug: string; readonly username: string; readonly role: Role }) {
  const out = yield* Output
  const slug = yield* slugArg(input.slug, "organization")
  const username = yield* slugArg(input.username, "user name")
  const { call, client } = yield* connect(remote)
  const member = yield* call(client.orgs.addMember({ params: { slug }, payload: { username, role: input.role } }))
  yield* out.result(member, () => `Added ${member.username} to ${slug} as ${member.role}.`)
})

export const remove = Effect.fn("Org.remove")(function*(remote: string, input: { readonly slug: string; readonly username: string }) {
  const out = yield* Output
  const slug = yield* slugArg(input.slug, "organization")
  const username = yield* slugArg(input.username, "user name")
  const { call, client } = yield* connect(remote)
  yield* call(client.orgs.removeMember({ params: { slug, username } }))
  yield* out.result({ removed: username, organization: slug }, () => `Removed ${username} from ${slug}.`)
})

export const role = Effect.fn("Org.role")(function*(remote: string, input: { readonly slug: string; readonly username: string; readonly role: Role }) {
  const out = yield* Output
  const slug = yield* slugArg(input.slug, "organization")
  const username = yield* slugArg(input.username, "user name")
  const { call, client } = yield* connect(remote)
  const member = yield* call(client.orgs.setRole({ params: { slug, username }, payload: { role: input.role } }))
  yield* out.result(member, () => `${member.username} is now ${member.role} of ${slug}.`)
})
