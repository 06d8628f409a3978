/** The pieces of the branch pages: state badges, the branch table, the commit list, the actions, the diffs. */
import type { Caller } from "@grove/api"
import { Effect } from "effect"
import type { BranchRecord } from "../content/BranchRecord.ts"
import type { CommitRow } from "../content/ContentObjects.ts"
import { csrfField } from "../web/Layout.ts"
import { formatTime, html, type Node, shortHash } from "../web/Render.ts"
import { branchHref, ciRunsHref, repoHref, type RepoShape } from "../web/RepoFrame.ts"
import type { PageSession } from "../web/Session.ts"
import { idempotencyField } from "../web/Forms.ts"
import { blobsByHash } from "../files/FileReads.ts"
import { callerPolicy } from "../path-permissions/CallerPolicy.ts"
import type { RepositoryRef } from "../path-permissions/PathPermissions.ts"
import { fileDiff } from "../web/Diff.ts"

export interface MergeState {
  /** clean, conflicts, no_changes or not_mergeable (merge preview's words). */
  readonly merge: string
  /** none, passed, running or failing. */
  readonly ci: string
}

export const stateBadge = (status: BranchRecord["status"]): Node =>
  html`<span class=${`badge ${status === "open" ? "ok" : status === "merged" ? "" : "warn"}`}>${status}</span>`

/** The branch's CI state; with `href` (the branch's CI runs) a link to them. */
export const ciBadge = (ci: string, href?: string): Node => {
  const badge = ci === "none" ? html`<span class="badge">no CI</span>`
    : html`<span class=${`badge ${ci === "passed" ? "ok" : ci === "running" ? "warn" : "bad"}`}>CI ${ci}</span>`
  return href === undefined ? badge : html`<a class="badge-link" href=${href}>${badge}</a>`
}

export const mergeBadge = (merge: string): Node =>
  merge === "clean" ? html`<span class="badge ok">merges cleanly</span>`
  : merge === "conflicts" ? html`<span class="badge bad">conflicts</span>`
  : merge === "no_changes" ? html`<span class="badge">no changes</span>`
  : null

export const branchTable = (repo: RepoShape, rows: ReadonlyArray<{ readonly branch: BranchRecord; readonly state: MergeState | undefined }>): Node =>
  html`<div class="box"><table class="list"><caption class="skip">Branches</caption>
<thead><tr><th scope="col">Branch</th><th scope="col" class="hide-narrow">Author</th><th scope="col" class="hide-narrow">Head</th><th scope="col">Updated</th><th scope="col">State</th></tr></thead>
<tbody>${
    rows.map(({ branch, state }) =>
      html`<tr><td><a href=${branchHref(repo, branch.name)}>${branch.name}</a>${
        branch.description === null ? null : html`<div class="muted">${branch.description.split("\n")[0]}</div>`
      }</td><td class="hide-narrow">${branch.createdBy}</td><td class="hide-narrow mono">${shortHash(branch.head)}</td>
<td class="muted">${formatTime(branch.updatedAt)}</td>
<td>${stateBadge(branch.status)} ${state === undefined ? null : html`${ciBadge(state.ci, ciRunsHref(repo, branch.name))} ${mergeBadge(state.merge)}`}</td></tr>`
    )
  }</tbody></table></div>`

export const commitHref = (repo: RepoShape, hash: string) => repoHref(repo, `/commits/${hash}`)

export const commitList = (repo: RepoShape, commits: ReadonlyArray<Pick<CommitRow, "hash" | "author" | "message" | "timestamp">>): Node =>
  commits.length === 0 ? html`<p class="muted">No commits of its own.</p>` : html`<div class="box"><table class="list"><caption class="skip">Commits</caption>
<thead><tr><th scope="col">Message</th><th scope="col" class="hide-narrow">Author</th><th scope="col">Commit</th></tr></thead><tbody>${
    commits.map((c) =>
      html`<tr><td>${(c.message ?? "").split("\n")[0] || html`<span class="muted">(no message)</span>`}<div class="muted">${formatTime(c.timestamp)}</div></td>
<td class="hide-narrow">${c.author}</td><td class="mono"><a href=${commitHref(repo, c.hash)}>${shortHash(c.hash)}</a></td></tr>`
    )
  }</tbody></table></div>`

/** A button that posts to one of the branch's actions (merge, close, reopen). */
export const actionForm = (session: PageSession, repo: RepoShape, branch: string, action: string, label: string, options: { readonly force?: boolean; readonly primary?: boolean } = {}): Node =>
  html`<form method="post" action=${branchHref(repo, branch) + `/${action}`} data-enhance>
${csrfField(session)}${idempotencyField()}${options.force === true ? html`<input type="hidden" name="force" value="1" />` : null}
<button type="submit" class=${options.primary === true ? "primary" : undefined}>${label}</button></form>`

/** What a refused merge (or close, reopen) answered, in words, with the conflicting paths or the Force button. */
export const refusalNotice = (session: PageSession, repo: RepoShape, branch: string, status: number, body: Record<string, unknown>): Node => {
  const message = typeof body["error"] === "string" ? body["error"] : `the server answered ${status}`
  const paths = Array.isArray(body["conflict_paths"]) ? body["conflict_paths"].filter((p): p is string => typeof p === "string") : []
  return html`<div class="notice bad" role="alert"><p><strong>${status === 409 && paths.length > 0 ? "Conflicts with main." : status === 412 ? "CI does not allow this merge yet." : "Not done."}</strong> ${message}</p>${
    paths.length === 0 ? null : html`<p>Conflicting paths:</p><ul class="conflicts">${paths.map((p) => html`<li class="mono">${p}</li>`)}</ul>`
  }${status === 412 ? html`<div class="actions">${actionForm(session, repo, branch, "merge", "Merge anyway (force)", { force: true })}</div>` : null}</div>`
}

/** Files larger than this show as "too large" in a diff (the file's own page shows them). */
const DIFF_FILE_MAX_BYTES = 512 * 1024

interface ChangedFile {
  readonly path: string
  readonly change_type: string
  readonly old_path?: string | null | undefined
  readonly old_blob_hash?: string | null | undefined
  readonly new_blob_hash?: string | null | undefined
}

/**
 * The per-file diffs of a branch or a commit as the caller may see them: a withheld file (by its path or
 * its old path) never appears; every side's blob is read in one go.
 */
export const visibleFileDiffs = (caller: Caller, repo: RepositoryRef, changed: ReadonlyArray<ChangedFile>) =>
  Effect.gen(function*() {
    const policy = yield* callerPolicy(caller, repo)
    const files = changed.filter((f) => policy.canRead(f.path) && (f.old_path == null || policy.canRead(f.old_path)))
    const hashes = files.flatMap((f) => [f.old_blob_hash, f.new_blob_hash].filter((h): h is string => typeof h === "string"))
    const blobs = yield* blobsByHash(repo.orgId, hashes, DIFF_FILE_MAX_BYTES)
    const side = (hash: string | null | undefined) => (typeof hash === "string" ? blobs.get(hash) : undefined)
    const missing = (hash: string | null | undefined) => typeof hash === "string" && !blobs.has(hash)
    return files.map((f) =>
      fileDiff({
        path: f.path,
        change: f.change_type,
        oldPath: f.old_path ?? undefined,
        before: side(f.old_blob_hash),
        after: side(f.new_blob_hash),
        tooLarge: missing(f.old_blob_hash) || missing(f.new_blob_hash)
      })
    )
  })
