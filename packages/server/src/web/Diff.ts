/**
 * A unified diff as a table: old and new line numbers, additions and deletions marked by colour and
 * by their `+`/`-` sign (colour alone is not enough), hunk headers. Files with long diffs start
 * collapsed (`<details>`: no script needed to open them).
 */
import { isBinary, unifiedDiff } from "@grove/core/merge/TextMerge"
import { html, type Node } from "./Render.ts"

/** Longer diffs start collapsed. */
export const COLLAPSE_FROM_LINES = 200
/** Longer diffs are not rendered at all (the file's page shows it). */
export const RENDER_MAX_LINES = 5000

export interface FileDiffInput {
  readonly path: string
  readonly change: string
  readonly oldPath?: string | undefined
  readonly before: Uint8Array | undefined
  readonly after: Uint8Array | undefined
  /** A side that exists but was too large to load. */
  readonly tooLarge: boolean
}

interface Row {
  readonly kind: "hunk" | "add" | "del" | "ctx"
  readonly old?: number
  readonly new?: number
  readonly text: string
}

const rowsOf = (diff: string): Array<Row> => {
  const rows: Array<Row> = []
  let oldLine = 0
  let newLine = 0
  for (const line of diff.split("\n")) {
    if (line.startsWith("--- ") || line.startsWith("+++ ") || line === "") continue
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line)
    if (hunk !== null) {
      oldLine = Number(hunk[1])
      newLine = Number(hunk[2])
      rows.push({ kind: "hunk", text: line })
    } else if (line.startsWith("+")) rows.push({ kind: "add", new: newLine++, text: line })
    else if (line.startsWith("-")) rows.push({ kind: "del", old: oldLine++, text: line })
    else if (line.startsWith("\\")) rows.push({ kind: "ctx", text: line })
    else rows.push({ kind: "ctx", old: oldLine++, new: newLine++, text: line })
  }
  return rows
}

const CLASS = { hunk: "hunk", add: "add", del: "del", ctx: "" } as const

const table = (path: string, rows: ReadonlyArray<Row>): Node =>
  html`<table class="diff"><caption class="skip">Changes to ${path}</caption><tbody>${
    rows.map((row) =>
      row.kind === "hunk"
        ? html`<tr class="hunk"><td class="ln"></td><td class="ln"></td><td>${row.text}</td></tr>`
        : html`<tr class=${CLASS[row.kind] || undefined}><td class="ln">${row.old ?? ""}</td><td class="ln">${row.new ?? ""}</td><td>${row.text}</td></tr>`
    )
  }</tbody></table>`

const decode = (bytes: Uint8Array | undefined) => (bytes === undefined ? "" : new TextDecoder().decode(bytes))

export const fileDiff = (input: FileDiffInput): Node => {
  const title = input.oldPath !== undefined && input.oldPath !== input.path ? `${input.oldPath} → ${input.path}` : input.path
  const summary = (open: boolean, note: string, body: Node) =>
    html`<details class="file box" open=${open}><summary class="filehead"><span class="mono">${title}</span> <span class="badge">${input.change}</span> <span class="muted">${note}</span></summary>${body}</details>`
  if (input.tooLarge) return summary(false, "too large to show", html`<p class="notice">This file is too large to show as a diff.</p>`)
  if ((input.before !== undefined && isBinary(input.before)) || (input.after !== undefined && isBinary(input.after))) {
    return summary(false, "binary", html`<p class="notice">Binary file changed.</p>`)
  }
  const diff = unifiedDiff(decode(input.before), decode(input.after), { oldLabel: `a/${input.oldPath ?? input.path}`, newLabel: `b/${input.path}` })
  const rows = rowsOf(diff)
  const added = rows.filter((r) => r.kind === "add").length
  const removed = rows.filter((r) => r.kind === "del").length
  const note = `+${added} −${removed}`
  if (rows.length === 0) return summary(false, "no text changes", html`<p class="notice">Only the file's mode or name changed.</p>`)
  if (rows.length > RENDER_MAX_LINES) return summary(false, note, html`<p class="notice">This diff has ${rows.length} lines: too long to show here.</p>`)
  return summary(rows.length < COLLAPSE_FROM_LINES, note, table(input.path, rows))
}
