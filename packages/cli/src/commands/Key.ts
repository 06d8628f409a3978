/**
 * `grove key create|list|revoke`: the caller's personal API keys (`/api/api-keys`). A personal key has
 * one `scope`, `full` or `read` (the API's field), and may be limited to one repository; a new key is
 * printed once, listings show its prefix. (A service-account key has a list of `scopes`: grove sa key.)
 */
import { ApiSchemas } from "@grove/api"
import { Names } from "@grove/core"
import { Effect, Option } from "effect"
import { connect } from "../Client.ts"
import { usage } from "../Failures.ts"
import { Output, table } from "../Output.ts"

export const create = Effect.fn("Key.create")(function*(remote: string, input: {
  readonly name: string
  readonly scope: "full" | "read"
  readonly repo: Option.Option<string>
  readonly expiresAt: Option.Option<string>
}) {
  const out = yield* Output
  if (Option.isSome(input.repo) && Names.parseFullName(input.repo.value) === undefined) {
    return yield* usage(`--repo: expected a repository as owner/name, got ${JSON.stringify(input.repo.value)}`)
  }
  const { client, write } = yield* connect(remote)
  const created = yield* write(client.apiKeys.create({
    payload: {
      name: input.name,
      scope: input.scope,
      ...Option.match(input.repo, { onNone: () => ({}), onSome: (repo) => ({ repo }) }),
      ...Option.match(input.expiresAt, { onNone: () => ({}), onSome: (expires_at) => ({ expires_at }) })
    }
  }), ApiSchemas.CreatedApiKey)
  const limits = [created.scope, ...(created.repo === undefined ? [] : [`only ${created.repo}`]), ...(created.expires_at === undefined ? [] : [`until ${created.expires_at}`])]
  yield* out.result(created, () => [`Created key ${created.id} (${limits.join(", ")}). It is shown once:`, created.key].join("\n"))
})

export const list = Effect.fn("Key.list")(function*(remote: string) {
  const out = yield* Output
  const { call, client } = yield* connect(remote)
  const keys = yield* call(client.apiKeys.list({ query: {} }))
  yield* out.result(keys, () =>
    keys.api_keys.length === 0
      ? "No personal keys: grove key create NAME"
      : table(
        ["ID", "NAME", "SCOPE", "REPO", "PREFIX", "CREATED", "LAST USED", "EXPIRES"],
        keys.api_keys.map((k) => [k.id, k.name, k.scope, k.repo ?? "", k.prefix, k.created_at, k.last_used_at ?? "never", k.expires_at ?? "never"])
      ))
})

export const revoke = Effect.fn("Key.revoke")(function*(remote: string, input: { readonly id: string }) {
  const out = yield* Output
  if (!/^[0-9A-Za-z-]{1,64}$/.test(input.id)) return yield* usage("invalid key id")
  const { call, client } = yield* connect(remote)
  yield* call(client.apiKeys.revoke({ params: { id: input.id } }))
  yield* out.result({ revoked: input.id }, () => `Revoked key ${input.id}: it no longer works.`)
})
