/** The pieces of the code pages: a directory listing, a file's view, the clone hints, a README. */
import { isBinary } from "@grove/core/merge/TextMerge"
import { renderMarkdown } from "../web/Markdown.ts"
import { formatSize, html, type Node, trusted } from "../web/Render.ts"
import { pathHref, repoHref, type RepoShape } from "../web/RepoFrame.ts"
import type { DirectoryEntry } from "./FileReads.ts"

/** Files larger than this are offered for download instead of being shown. */
export const SHOW_MAX_BYTES = 1024 * 1024

const refHref = (ref: string) => encodeURIComponent(ref)

export const treeHref = (repo: RepoShape, ref: string, path: string) =>
  repoHref(repo, `/tree/${refHref(ref)}${path === "" ? "" : `/${pathHref(path)}`}`)
export const blobHref = (repo: RepoShape, ref: string, path: string) => repoHref(repo, `/blob/${refHref(ref)}/${pathHref(path)}`)
export const rawHref = (repo: RepoShape, ref: string, path: string) => repoHref(repo, `/raw/${refHref(ref)}/${pathHref(path)}`)

export const directoryTable = (repo: RepoShape, ref: string, entries: ReadonlyArray<DirectoryEntry>, caption: string): Node =>
  html`<div class="box"><table class="list"><caption class="skip">${caption}</caption>
<thead><tr><th scope="col">Name</th><th scope="col" class="num">Size</th></tr></thead>
<tbody>${
    entries.map((entry) =>
      entry.kind === "tree"
        ? html`<tr><td class="entry-dir"><a href=${treeHref(repo, ref, entry.path)}>${entry.name}/</a></td><td class="num"></td></tr>`
        : html`<tr><td><a href=${blobHref(repo, ref, entry.path)}>${entry.name}</a></td><td class="num">${formatSize(entry.size ?? 0)}</td></tr>`
    )
  }</tbody></table></div>`

export const cloneHints = (repo: RepoShape, siteUrl: string): Node =>
  html`<section class="box" aria-labelledby="clone-title"><header><h2 id="clone-title">Clone</h2></header>
<div class="clone">
<span>grove</span><code>grove clone ${repo.owner}/${repo.name}</code>
<span>git</span><code>git clone ${siteUrl}${repoHref(repo)}.git</code>
<span>zip</span><span><a href=${repoHref(repo, "/download")}>Download main as a zip</a></span>
</div></section>`

const README = /^readme(\.(md|markdown|txt))?$/i

export const readmeOf = (entries: ReadonlyArray<DirectoryEntry>): DirectoryEntry | undefined =>
  entries.find((entry) => entry.kind === "blob" && README.test(entry.name) && (entry.size ?? 0) <= SHOW_MAX_BYTES)

export const readmeView = (entry: DirectoryEntry, bytes: Uint8Array): Node => {
  const text = new TextDecoder().decode(bytes)
  const markdown = /\.(md|markdown)$/i.test(entry.name)
  return html`<section class="box" aria-labelledby="readme-title"><header><h2 id="readme-title">${entry.name}</h2></header>${
    markdown ? trusted("div", "markdown", renderMarkdown(text)) : html`<div class="code" tabindex="0" role="region" aria-label=${entry.name}><pre>${text}</pre></div>`
  }</section>`
}

/** Line numbers beside the highlighted text (`highlighted`: escaped HTML); the numbers are hidden from screen readers. */
export const codeView = (text: string, path: string, highlighted: string): Node => {
  const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n").length : text.split("\n").length
  const numbers = Array.from({ length: lines }, (_, i) => i + 1).join("\n")
  return html`<div class="code" tabindex="0" role="region" aria-label=${`Contents of ${path}`}><pre class="gutter" aria-hidden="true">${numbers}</pre>${
    trusted("pre", "hljs", `<code>${highlighted}</code>`)
  }</div>`
}

/** A file's text, when it is shown: not too large, not binary. */
export const shownText = (bytes: Uint8Array | undefined): string | undefined =>
  bytes === undefined || isBinary(bytes) ? undefined : new TextDecoder().decode(bytes)

/** A file's body: its highlighted text, or why it is not shown. */
export const fileBody = (path: string, size: number, bytes: Uint8Array | undefined, text: string | undefined, highlighted: string | undefined): Node => {
  if (bytes === undefined) return html`<p class="notice">This file is ${formatSize(size)}: too large to show here. Use the raw or download link.</p>`
  if (text === undefined || highlighted === undefined) return html`<p class="notice">Binary file (${formatSize(size)}). Use the download link.</p>`
  return codeView(text, path, highlighted)
}
