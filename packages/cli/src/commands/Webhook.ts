/**
 * `grove webhook add|list|remove|deliveries|redeliver`: a repository's webhooks and their delivery
 * log. The repository is `--repo OWNER/NAME`, else the checkout's; a secret is read from stdin
 * (`--secret-stdin`), never from the command line.
 */
import type { ApiWebhooks } from "@grove/api"
import { Effect, Option } from "effect"
import { usage } from "../Failures.ts"
import { Output, table } from "../Output.ts"
import { transfer } from "../sync/RemoteRepo.ts"
import { target } from "./Ci.ts"

const EVENTS = new Set(["push", "branch.created", "merge"])

export const add = Effect.fn("Webhook.add")(function*(remote: string, input: {
  readonly repo: Option.Option<string>
  readonly url: string
  readonly events: Option.Option<string>
  readonly secretStdin: boolean
}) {
  const out = yield* Output
  const events = Option.match(input.events, { onNone: () => [], onSome: (list) => list.split(",").map((e) => e.trim()).filter((e) => e !== "") })
  const unknown = events.filter((e) => !EVENTS.has(e))
  if (unknown.length > 0) return yield* usage(`--events takes push, branch.created and merge, not ${unknown.join(", ")}`)
  let secret: string | undefined
  if (input.secretStdin) {
    secret = (yield* transfer("reading the secret from stdin", async () => {
      const parts: Array<Buffer> = []
      for await (const part of process.stdin) parts.push(part as Buffer)
      return Buffer.concat(parts).toString("utf8")
    })).replace(/\r?\n$/, "")
    if (secret.length === 0) return yield* usage("the secret read from stdin is empty")
  }
  const repo = yield* target(remote, input.repo)
  const hook = yield* repo.connection.call(repo.connection.client.webhooks.create({
    params: { owner: repo.owner, name: repo.name },
    payload: { url: input.url, events: events as Array<ApiWebhooks.WebhookEvent>, ...(secret === undefined ? {} : { secret }) }
  }))
  yield* out.result(hook, () => `Added webhook ${hook.id} for ${hook.events.join(", ")}${hook.has_secret ? " (signed)" : ""}${hook.chat ? " (chat channel)" : ""}.`)
})

export const list = Effect.fn("Webhook.list")(function*(remote: string, input: { readonly repo: Option.Option<string> }) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  const hooks = yield* repo.connection.call(repo.connection.client.webhooks.list({ params: { owner: repo.owner, name: repo.name } }))
  yield* out.result(hooks, () =>
    hooks.webhooks.length === 0
      ? "No webhooks."
      : table(["ID", "URL", "EVENTS", "SIGNED"], hooks.webhooks.map((h) => [h.id, h.url, h.events.join(","), h.has_secret ? "yes" : "no"])))
})

export const remove = Effect.fn("Webhook.remove")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly id: string }) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  yield* repo.connection.call(repo.connection.client.webhooks.remove({ params: { owner: repo.owner, name: repo.name, id: input.id } }))
  yield* out.result({ removed: input.id }, () => `Removed webhook ${input.id}.`)
})

export const deliveries = Effect.fn("Webhook.deliveries")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly id: string; readonly limit: number }) {
  const out = yield* Output
  if (!Number.isInteger(input.limit) || input.limit < 1 || input.limit > 200) return yield* usage("--limit must be 1 to 200")
  const repo = yield* target(remote, input.repo)
  const list = yield* repo.connection.call(repo.connection.client.webhooks.deliveries({
    params: { owner: repo.owner, name: repo.name, id: input.id },
    query: { limit: String(input.limit) }
  }))
  yield* out.result(list, () =>
    list.deliveries.length === 0
      ? "No deliveries yet."
      : table(
        ["DELIVERY", "EVENT", "STATUS", "ATTEMPTS", "HTTP", "MS", "ERROR"],
        list.deliveries.map((d) => [d.id, d.event, d.status, String(d.attempts), d.status_code === null ? "-" : String(d.status_code), d.duration_ms === null ? "-" : String(d.duration_ms), d.error ?? ""])
      ))
})

export const redeliver = Effect.fn("Webhook.redeliver")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly id: string; readonly delivery: string }) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  const delivery = yield* repo.connection.call(repo.connection.client.webhooks.redeliver({
    params: { owner: repo.owner, name: repo.name, id: input.id, delivery: input.delivery }
  }))
  yield* out.result(delivery, () => `Queued delivery ${delivery.id} (again of ${input.delivery}).`)
})
