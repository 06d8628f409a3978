/**
 * Templates for the web pages: htm's tagged templates (JSX-like syntax, parsed at run time once per
 * call site, so Node runs these files with no build step) over a small builder that writes HTML
 * strings directly. Every interpolated value is escaped, in text and in attributes; only `trusted`
 * (sanitized Markdown, highlight.js output of escaped text) inserts HTML as it is. An attribute whose
 * value is null, undefined or false is left out; `true` writes it bare (`open`, `defer`).
 */
import htm from "htm"
import { escapeHtml } from "./Html.ts"

/** HTML made by the builder (or trusted): inserted as it is, never escaped again. */
export class Html {
  readonly value: string
  constructor(value: string) {
    this.value = value
  }
  toString() {
    return this.value
  }
}

export type Node = Html | string | number | null | undefined | false | ReadonlyArray<Node>

const VOID = new Set(["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"])

const write = (node: Node | boolean, out: Array<string>): void => {
  if (node === null || node === undefined || node === false || node === true) return
  if (node instanceof Html) out.push(node.value)
  else if (Array.isArray(node)) for (const child of node as ReadonlyArray<Node>) write(child, out)
  else out.push(escapeHtml(String(node)))
}

const ATTRIBUTE_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:.-]*$/

const element = (type: unknown, props: Record<string, unknown> | null, ...children: Array<Node>): Html => {
  if (typeof type !== "string" || !ATTRIBUTE_NAME.test(type)) throw new Error(`not an element name: ${String(type)}`)
  const out: Array<string> = [`<${type}`]
  let inner: string | undefined
  for (const [name, value] of Object.entries(props ?? {})) {
    if (name === "dangerouslySetInnerHTML") {
      inner = (value as { __html: string }).__html
      continue
    }
    if (value === null || value === undefined || value === false || !ATTRIBUTE_NAME.test(name)) continue
    out.push(value === true ? ` ${name}` : ` ${name}="${escapeHtml(String(value))}"`)
  }
  out.push(">")
  if (VOID.has(type)) return new Html(out.join(""))
  if (inner !== undefined) out.push(inner)
  else write(children, out)
  out.push(`</${type}>`)
  return new Html(out.join(""))
}

// htm's types describe its CommonJS build; under ESM the default import is the function itself.
const build = (htm as unknown as { readonly bind: typeof htm.default.bind }).bind(element)

/** A template: one element, or several (a fragment). Text between elements is escaped. */
export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<unknown>): Html => {
  const result = build(strings, ...values) as Html | ReadonlyArray<Node>
  if (result instanceof Html) return result
  const out: Array<string> = []
  write(result as Node, out)
  return new Html(out.join(""))
}

/** HTML that was made safe elsewhere (sanitized Markdown, highlighter output of escaped text). */
export const trusted = (tag: string, className: string | undefined, safeHtml: string): Html =>
  html`<${tag} class=${className} dangerouslySetInnerHTML=${{ __html: safeHtml }} />`

export const renderDocument = (page: Html): string => `<!doctype html>\n${page.value}`

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
