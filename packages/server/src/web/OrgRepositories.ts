/**
 * The repositories of an organization page that manages something per repository (webhooks, CI
 * secrets): those the viewer may see, by the same read the API's listing uses, and the form field
 * that picks one of them.
 */
import { Effect } from "effect"
import { Repositories } from "../access/Repositories.ts"
import type { RepositoryRecord } from "../access/RepositoryRecord.ts"
import { dbUnavailable } from "../http/Failures.ts"
import type { OrgShape } from "./OrgFrame.ts"
import { html, type Node } from "./Render.ts"
import type { PageSession } from "./Session.ts"

/** More than a page shows at once; an organization with more manages them through the API. */
const SHOWN = 200

export const orgRepositories = (session: PageSession, org: Pick<OrgShape, "id">) =>
  Effect.gen(function*() {
    const repositories = yield* Repositories
    const rows = yield* dbUnavailable(repositories.listReadable(session.caller.principal, session.caller.limits, "name", { limit: SHOWN }, org.id))
    return rows.slice(0, SHOWN).map((keyed): RepositoryRecord => keyed.row)
  })

/** A labelled `<select name="repo">` of the repositories, by name. */
export const repositoryField = (id: string, repos: ReadonlyArray<Pick<RepositoryRecord, "name">>, selected?: string): Node =>
  html`<label for=${id}>Repository</label><select id=${id} name="repo" required>${
    repos.map((repo) => html`<option value=${repo.name} selected=${repo.name === selected}>${repo.name}</option>`)
  }</select>`
