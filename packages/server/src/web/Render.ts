/**
 * Templates for the web pages: htm's tagged templates over Preact's virtual nodes, rendered to a
 * string on the server. Every interpolated value is escaped (text and attributes) unless it goes
 * through `trusted`, which only sanitized Markdown and highlight.js output do. No build step: htm
 * parses the template literal at run time (once per call site), so Node runs these files as they are.
 */
import { html } from "htm/preact"
import type { VNode } from "preact"
import { render } from "preact-render-to-string"

export { html }
export type Node = VNode | string | number | null | undefined | false | ReadonlyArray<Node>

/** HTML that was made safe elsewhere (sanitized Markdown, highlighter output of escaped text). */
export const trusted = (tag: string, className: string | undefined, safeHtml: string): VNode =>
  html`<${tag} class=${className} dangerouslySetInnerHTML=${{ __html: safeHtml }} />`

export const renderDocument = (page: VNode): string => `<!doctype html>\n${render(page)}`

/** Bytes in a human unit: 1536 -> "1.5 KiB". */
export const formatSize = (bytes: number): string => {
  if (bytes < 1024) return `${bytes} B`
  const units = ["KiB", "MiB", "GiB", "TiB"]
  let value = bytes / 1024
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`
}

/** A time as "2026-11-26 19:40 UTC": the same for every reader, no script needed. */
export const formatTime = (value: Date | string): string => {
  const date = value instanceof Date ? value : new Date(value)
  return Number.isNaN(date.getTime()) ? "" : `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`
}

export const shortHash = (hash: string | null | undefined): string => (hash ?? "").slice(0, 10)
