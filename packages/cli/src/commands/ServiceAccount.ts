/**
 * `grove sa create|list|disable|enable|delete` and `grove sa key create|list|revoke`: an
 * organization's service accounts and their scoped keys (`/api/orgs/{slug}/service-accounts/...`).
 * A new key is printed once; listings show its prefix.
 */
import { Effect, Option } from "effect"
import { connect } from "../Client.ts"
import { usage } from "../Failures.ts"
import { Output, table } from "../Output.ts"
import { slugArg } from "./Org.ts"

interface Target {
  readonly org: string
  readonly name: string
}

const target = (input: Target) =>
  Effect.all({ slug: slugArg(input.org, "organization"), name: slugArg(input.name, "service account") })

export const create = Effect.fn("ServiceAccount.create")(function*(remote: string, input: Target & { readonly displayName: Option.Option<string> }) {
  const out = yield* Output
  const { slug, name } = yield* target(input)
  const { call, client } = yield* connect(remote)
  const account = yield* call(client.serviceAccounts.create({
    params: { slug },
    payload: { name, ...Option.match(input.displayName, { onNone: () => ({}), onSome: (display_name) => ({ display_name }) }) }
  }))
  yield* out.result(account, () => `Created service account ${account.name} in ${slug}.`)
})

export const list = Effect.fn("ServiceAccount.list")(function*(remote: string, input: { readonly org: string }) {
  const out = yield* Output
  const slug = yield* slugArg(input.org, "organization")
  const { call, client } = yield* connect(remote)
  const accounts = yield* call(client.serviceAccounts.list({ params: { slug }, query: {} }))
  yield* out.result(accounts, () =>
    table(["NAME", "DISPLAY NAME", "STATE", "CREATED"], accounts.service_accounts.map((a) => [a.name, a.display_name ?? "", a.disabled ? "disabled" : "enabled", a.created_at])))
})

export const setDisabled = Effect.fn("ServiceAccount.setDisabled")(function*(remote: string, input: Target, disabled: boolean) {
  const out = yield* Output
  const { slug, name } = yield* target(input)
  const { call, client } = yield* connect(remote)
  const account = yield* call(client.serviceAccounts.update({ params: { slug, name }, payload: { disabled } }))
  yield* out.result(account, () => `${account.name} is ${account.disabled ? "disabled: all its keys stopped working" : "enabled"}.`)
})

export const remove = Effect.fn("ServiceAccount.remove")(function*(remote: string, input: Target) {
  const out = yield* Output
  const { slug, name } = yield* target(input)
  const { call, client } = yield* connect(remote)
  yield* call(client.serviceAccounts.remove({ params: { slug, name } }))
  yield* out.result({ deleted: name, organization: slug }, () => `Deleted service account ${name}; its keys no longer work.`)
})

export const createKey = Effect.fn("ServiceAccount.createKey")(function*(remote: string, input: Target & { readonly keyName: string; readonly scopes: string }) {
  const out = yield* Output
  const { slug, name } = yield* target(input)
  if (!/^(read|write|merge|admin|release)(,(read|write|merge|admin|release))*$/.test(input.scopes)) {
    return yield* usage("--scopes must be a comma-separated list of read, write, merge, admin, release")
  }
  const { call, client } = yield* connect(remote)
  const key = yield* call(client.serviceAccounts.createKey({ params: { slug, name }, payload: { name: input.keyName, scopes: input.scopes } }))
  yield* out.result(key, () => [`Created key ${key.key_id} (${key.scopes}) for ${name}. It is shown once:`, key.key].join("\n"))
})

export const listKeys = Effect.fn("ServiceAccount.listKeys")(function*(remote: string, input: Target) {
  const out = yield* Output
  const { slug, name } = yield* target(input)
  const { call, client } = yield* connect(remote)
  const keys = yield* call(client.serviceAccounts.keys({ params: { slug, name }, query: {} }))
  yield* out.result(keys, () =>
    table(["ID", "NAME", "SCOPES", "PREFIX", "CREATED", "LAST USED"], keys.keys.map((k) => [k.key_id, k.name, k.scopes, k.prefix, k.created_at, k.last_used_at ?? "never"])))
})

export const revokeKey = Effect.fn("ServiceAccount.revokeKey")(function*(remote: string, input: Target & { readonly keyId: string }) {
  const out = yield* Output
  const { slug, name } = yield* target(input)
  if (!/^[0-9A-Za-z-]{1,64}$/.test(input.keyId)) return yield* usage("invalid key id")
  const { call, client } = yield* connect(remote)
  yield* call(client.serviceAccounts.revokeKey({ params: { slug, name, key_id: input.keyId } }))
  yield* out.result({ revoked: input.keyId }, () => `Revoked key ${input.keyId}.`)
})
