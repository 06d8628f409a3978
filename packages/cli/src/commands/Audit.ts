/**
 * `grove audit [--org ORG] [--action A] [--actor NAME]`: an organization's audit log, newest first
 * (`GET /api/orgs/{slug}/audit`, every page). Without `--org`, the caller's own organization: a
 * user's personal one, a service account's owner. Owners and admins only: a plain member gets the
 * server's 403 (exit 1), a missing or hidden organization 404 (exit 1), no credential 401 (exit 6).
 */
import type { AuditEntry } from "@grove/api"
import { Names } from "@grove/core"
import { Effect, Option } from "effect"
import { connect, type Connection } from "../Client.ts"
import { usage } from "../Failures.ts"
import { Output, table } from "../Output.ts"

const CURSOR_HEADER = "x-next-cursor"

/** One line of details for the table: `key=value`, values as JSON unless plain strings. */
export const detailsText = (details: Readonly<Record<string, unknown>>): string =>
  Object.entries(details).map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`).join(" ")

/** Every page of the log (`X-Next-Cursor` names the next one), in the server's order: newest first. */
export const allPages = Effect.fn("Audit.allPages")(function*(
  { call, client }: Pick<Connection, "call" | "client">,
  slug: string,
  filters: { readonly action?: string; readonly actor?: string }
) {
  const entries: Array<AuditEntry> = []
  let cursor: string | undefined
  for (;;) {
    const [page, response] = yield* call(client.audit.list({
      params: { slug },
      query: { ...filters, ...(cursor === undefined ? {} : { cursor }) },
      responseMode: "decoded-and-response"
    }))
    entries.push(...page.entries)
    const next = response.headers[CURSOR_HEADER]
    if (next === undefined || next === "" || next === cursor || page.entries.length === 0) break
    cursor = next
  }
  return entries
})

export const audit = Effect.fn("Audit.list")(function*(remote: string, options: {
  readonly org: Option.Option<string>
  readonly action: Option.Option<string>
  readonly actor: Option.Option<string>
}) {
  const out = yield* Output
  if (Option.isSome(options.org)) {
    const check = Names.checkSlugFormat(options.org.value, "organization")
    if (!check.ok) return yield* usage(`invalid --org: ${check.reason}`)
  }
  for (const [flag, value] of [["--action", options.action], ["--actor", options.actor]] as const) {
    if (Option.isSome(value) && (value.value === "" || Names.hasControlCharacters(value.value) || [...value.value].length > 200)) {
      return yield* usage(`invalid ${flag}: 1-200 characters without control characters`)
    }
  }
  const { call, client } = yield* connect(remote)
  const slug = Option.isSome(options.org)
    ? options.org.value
    : yield* Effect.map(call(client.system.whoami()), (me) => me.organization ?? me.name)
  const filters = {
    ...Option.match(options.action, { onNone: () => ({}), onSome: (action) => ({ action }) }),
    ...Option.match(options.actor, { onNone: () => ({}), onSome: (actor) => ({ actor }) })
  }
  const entries = yield* allPages({ call, client }, slug, filters)
  yield* out.result(entries, () =>
    entries.length === 0
      ? `No audit entries in ${slug}.`
      : table(
        ["TIME", "ACTOR", "ACTION", "TARGET", "DETAILS"],
        entries.map((e) => [e.created_at, e.actor, e.action, e.target, detailsText(e.details)])
      ))
})
