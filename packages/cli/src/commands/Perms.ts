/**
 * `grove perms show OWNER/NAME`: the server's parse of `.oak/PERMISSIONS` on main — its rules,
 * principals, warnings with their line numbers, and whether it is enforced. `grove perms propose`:
 * a new file (or its deletion) as a branch to review and merge (admins and owners).
 */
import { Names } from "@grove/core"
import { Effect, Option } from "effect"
import * as fs from "node:fs"
import { connect } from "../Client.ts"
import { usage } from "../Failures.ts"
import { Output, table } from "../Output.ts"

export const show = Effect.fn("Perms.show")(function*(remote: string, input: { readonly repo: string }) {
  const out = yield* Output
  const full = Names.parseFullName(input.repo)
  if (full === undefined) return yield* usage("the repository must be given as owner/name")
  const { call, client } = yield* connect(remote)
  const view = yield* call(client.pathPermissions.show({ params: { owner: full.owner, name: full.name } }))
  yield* out.result(view, () =>
    !view.enforced
      ? `No .oak/PERMISSIONS on main of ${input.repo}: nothing is restricted.`
      : [
        `Enforced at ${view.commit ?? "?"}${view.lockdown ? " (LOCKDOWN: every path is restricted to owners and admins)" : ""}.`,
        table(["LINE", "PATTERN", "PRINCIPALS"], view.entries.map((e) => [String(e.line), e.pattern, e.principals.join(" ") || "(nobody)"])),
        ...(view.warnings.length === 0 ? [] : ["Warnings:", ...view.warnings.map((w) => `  line ${w.line}: ${w.message}`)])
      ].join("\n"))
})

/** `grove perms propose FILE [--description D]` or `grove perms propose --delete`: a branch off main carrying the change. */
export const propose = Effect.fn("Perms.propose")(function*(remote: string, input: {
  readonly repo: string
  readonly file: Option.Option<string>
  readonly remove: boolean
  readonly description: Option.Option<string>
}) {
  const out = yield* Output
  const full = Names.parseFullName(input.repo)
  if (full === undefined) return yield* usage("the repository must be given as owner/name")
  if (input.remove === Option.isSome(input.file)) return yield* usage("give either FILE or --delete")
  const description = Option.match(input.description, { onNone: () => ({}), onSome: (description) => ({ description }) })
  let payload: { readonly content: string; readonly description?: string } | { readonly delete: true; readonly description?: string }
  if (Option.isSome(input.file)) {
    const path = input.file.value
    const content = yield* Effect.tryPromise({
      try: () => fs.promises.readFile(path, "utf8"),
      catch: () => usage(`cannot read ${path}`)
    })
    payload = { content, ...description }
  } else {
    payload = { delete: true, ...description }
  }
  const { call, client } = yield* connect(remote)
  const proposal = yield* call(client.pathPermissions.propose({ params: { owner: full.owner, name: full.name }, payload }))
  yield* out.result(proposal, () => `Proposed on branch ${proposal.branch} (${proposal.commit.slice(0, 12)}); merge it to put it in force.`)
})
