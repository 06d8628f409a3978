/**
 * `grove repo list|create|show|delete|visibility`. Names are checked with the same rules
 * as the server (`@grove/core` Names) so a bad argument is a usage error (2)
 * before anything is sent.
 */
import { ApiSchemas } from "@grove/api"
import { Names } from "@grove/core"
import { Effect, Option, Schema } from "effect"
import { connect } from "../Client.ts"
import { failure, usage } from "../Failures.ts"
import { Interaction } from "../Interaction.ts"
import { openWorkspace } from "../local/Workspace.ts"
import { Output, table } from "../Output.ts"
import { remoteOf } from "../sync/Session.ts"

type Repository = ApiSchemas.Repository

const parseFullName = (value: string) => {
  const parsed = Names.parseFullName(value)
  return parsed === undefined
    ? Effect.fail(usage(`expected a repository as owner/name, got ${JSON.stringify(value)}`))
    : Effect.succeed(parsed)
}

const describe = (repo: Repository): string =>
  [
    `${repo.full_name} (${repo.visibility})`,
    ...(repo.description === undefined || repo.description === "" ? [] : [repo.description]),
    "",
    `Head:           ${repo.head ?? "(empty repository)"}`,
    `Default branch: ${repo.default_branch}`,
    `Created:        ${repo.created_at}`,
    `Updated:        ${repo.updated_at}`
  ].join("\n")

export const list = Effect.fn("Repo.list")(function*(remote: string, options: {
  readonly sort: Option.Option<"name" | "updated" | "created">
}) {
  const out = yield* Output
  const { call, client } = yield* connect(remote)
  const listed = yield* call(client.repos.list({ query: Option.match(options.sort, { onNone: () => ({}), onSome: (sort) => ({ sort }) }) }))
  const repos = listed.repos
  yield* out.result(listed, () =>
    repos.length === 0
      ? "No repositories."
      : table(
        ["NAME", "VISIBILITY", "UPDATED", "DESCRIPTION"],
        repos.map((r) => [r.full_name, r.visibility, r.updated_at, r.description ?? ""])
      ))
})

export const create = Effect.fn("Repo.create")(function*(remote: string, options: {
  readonly name: string
  readonly org: Option.Option<string>
  readonly public: boolean
  readonly description: Option.Option<string>
}) {
  const out = yield* Output
  const nameCheck = Names.checkRepoName(options.name)
  if (!nameCheck.ok) return yield* usage(`invalid repository name: ${nameCheck.reason}`)
  if (Option.isSome(options.org)) {
    const orgCheck = Names.checkSlug(options.org.value, "organization")
    if (!orgCheck.ok) return yield* usage(`invalid --org: ${orgCheck.reason}`)
  }
  const { client, write } = yield* connect(remote)
  const repo = yield* write(
    client.repos.create({
      payload: {
        name: options.name,
        is_public: options.public,
        ...Option.match(options.org, { onNone: () => ({}), onSome: (organization_slug) => ({ organization_slug }) }),
        ...Option.match(options.description, { onNone: () => ({}), onSome: (description) => ({ description }) })
      }
    }),
    ApiSchemas.Repository
  )
  yield* out.result(repo, () => `Created repository ${repo.full_name} (${repo.visibility}).`)
})

export const show = Effect.fn("Repo.show")(function*(remote: string, options: { readonly repo: string }) {
  const out = yield* Output
  const params = yield* parseFullName(options.repo)
  const { call, client } = yield* connect(remote)
  const repo = yield* call(client.repos.get({ params }))
  yield* out.result(repo, () => describe(repo))
})

export const remove = Effect.fn("Repo.delete")(function*(remote: string, options: { readonly repo: string; readonly yes: boolean }) {
  const out = yield* Output
  const interaction = yield* Interaction
  const params = yield* parseFullName(options.repo)
  const fullName = `${params.owner}/${params.name}`
  if (!options.yes) {
    if (!interaction.isTerminal) {
      return yield* usage(`refusing to delete ${fullName} without --yes when stdin is not a terminal`)
    }
    yield* out.note(`This deletes ${fullName} on ${remote}, with all its branches and history.`)
    const answer = yield* interaction.readLine(`Type ${fullName} to confirm: `)
    if (Option.getOrElse(answer, () => "").trim() !== fullName) {
      return yield* failure("not confirmed; nothing was deleted", "not_confirmed")
    }
  }
  const { client, write } = yield* connect(remote)
  yield* write(client.repos.delete({ params }), Schema.Unknown)
  yield* out.result({ deleted: fullName }, () => `Deleted repository ${fullName}.`)
})

/**
 * `grove repo visibility <public|private> [owner/name]`: without a repository, the checkout's
 * (on the server the checkout is bound to).
 */
export const visibility = Effect.fn("Repo.visibility")(function*(remote: string, options: {
  readonly visibility: "public" | "private"
  readonly repo: Option.Option<string>
}) {
  const out = yield* Output
  const named = options.repo
  const target = Option.isSome(named)
    ? yield* Effect.gen(function*() {
      const params = yield* parseFullName(named.value)
      const { client, write } = yield* connect(remote)
      return { params, client, write }
    })
    : yield* Effect.gen(function*() {
      const { workspace } = yield* openWorkspace()
      const bound = yield* remoteOf(workspace)
      return { params: { owner: bound.owner, name: bound.name }, client: bound.connection.client, write: bound.connection.write }
    })
  const repo = yield* target.write(
    target.client.repos.setVisibility({ params: target.params, payload: { is_public: options.visibility === "public" } }),
    ApiSchemas.Repository
  )
  yield* out.result(repo, () => `${repo.full_name} is now ${repo.visibility}.`)
})
