/**
 * `grove perms show [OWNER/NAME]`: the server's parse of `.oak/PERMISSIONS` on main — its rules,
 * principals, warnings with their line numbers, and whether it is enforced.
 */
import { Names } from "@grove/core"
import { Effect } from "effect"
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
