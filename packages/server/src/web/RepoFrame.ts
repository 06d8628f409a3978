/** The head of every repository page: breadcrumbs, name, visibility, description and the tabs. */
import type { Node } from "./Render.ts"
import { html } from "./Render.ts"
import type { Crumb } from "./Layout.ts"

export interface RepoShape {
  readonly owner: string
  readonly name: string
  readonly description: string | null
  readonly isPublic: boolean
}

export type RepoTab = "code" | "branches" | "commits" | "ci"

/** `/{owner}/{name}` with each part percent-encoded; `rest` is appended as given. */
export const repoHref = (repo: Pick<RepoShape, "owner" | "name">, rest = "") =>
  `/${encodeURIComponent(repo.owner)}/${encodeURIComponent(repo.name)}${rest}`

/** A path inside the repository as an address: each segment encoded, slashes kept. */
export const pathHref = (path: string) => path.split("/").map(encodeURIComponent).join("/")

export const branchHref = (repo: Pick<RepoShape, "owner" | "name">, branch: string) =>
  repoHref(repo, `/branches/${encodeURIComponent(branch)}`)

/** The CI runs page, of one branch when given (`?branch=`). */
export const ciRunsHref = (repo: Pick<RepoShape, "owner" | "name">, branch?: string) =>
  repoHref(repo, branch === undefined ? "/ci" : `/ci?branch=${encodeURIComponent(branch)}`)

export const repoCrumbs = (repo: Pick<RepoShape, "owner" | "name">, more: ReadonlyArray<Crumb> = []): ReadonlyArray<Crumb> => [
  { label: repo.owner },
  { label: repo.name, href: repoHref(repo) },
  ...more
]

const TABS: ReadonlyArray<readonly [RepoTab, string, string]> = [["code", "Code", ""], ["branches", "Branches", "/branches"], ["commits", "Commits", "/commits"], ["ci", "CI", "/ci"]]

export const repoHeader = (repo: RepoShape, current: RepoTab, extra?: Node): Node =>
  html`<h1>${repo.owner}/${repo.name}</h1>
<div class="meta"><span class="badge">${repo.isPublic ? "Public" : "Private"}</span>${extra}</div>
${repo.description === null ? null : html`<p>${repo.description}</p>`}
<nav class="tabs" aria-label="Repository">${
    TABS.map(([tab, label, path]) => html`<a href=${repoHref(repo, path)} aria-current=${tab === current ? "page" : undefined}>${label}</a>`)
  }</nav>`
