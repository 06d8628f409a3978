/**
 * Syntax highlighting with highlight.js: class names only (the stylesheet colours them), so the
 * CSP needs no inline styles. The language comes from the file name; unknown or very large files
 * are shown as escaped plain text (auto-detection costs too much per request).
 */
import { Effect } from "effect"
import { createRequire } from "node:module"
import { TtlCache } from "../cache/TtlCache.ts"
import { escapeHtml } from "./Html.ts"

/** The part of highlight.js's API used here (its own types would bring the DOM's into the whole project). */
interface Highlighter {
  readonly getLanguage: (name: string) => object | undefined
  readonly highlight: (code: string, options: { readonly language: string; readonly ignoreIllegals: boolean }) => { readonly value: string }
}

const hljs = createRequire(import.meta.url)("highlight.js/lib/common") as Highlighter

const BY_EXTENSION: Record<string, string> = {
  ts: "typescript", tsx: "typescript", mts: "typescript", cts: "typescript",
  js: "javascript", mjs: "javascript", cjs: "javascript", jsx: "javascript",
  py: "python", rs: "rust", go: "go", java: "java", kt: "kotlin", c: "c", h: "c",
  cc: "cpp", cpp: "cpp", hpp: "cpp", cs: "csharp", rb: "ruby", php: "php", swift: "swift",
  sh: "bash", bash: "bash", zsh: "bash", json: "json", yml: "yaml", yaml: "yaml", toml: "ini", ini: "ini",
  md: "markdown", html: "xml", xml: "xml", svg: "xml", css: "css", scss: "scss", sql: "sql",
  diff: "diff", patch: "diff", makefile: "makefile", dockerfile: "dockerfile", lua: "lua", r: "r", pl: "perl"
}

/** Past this, highlighting a file costs more than it helps a reader. */
export const HIGHLIGHT_MAX_BYTES = 512 * 1024

export const languageOf = (path: string): string | undefined => {
  const name = path.slice(path.lastIndexOf("/") + 1).toLowerCase()
  const dot = name.lastIndexOf(".")
  const language = BY_EXTENSION[dot === -1 ? name : name.slice(dot + 1)]
  return language !== undefined && hljs.getLanguage(language) !== undefined ? language : undefined
}

/** Escaped HTML of the text, with `hljs-*` spans when the language is known. */
export const highlight = (text: string, path: string): string => {
  const language = text.length > HIGHLIGHT_MAX_BYTES ? undefined : languageOf(path)
  return language === undefined ? escapeHtml(text) : hljs.highlight(text, { language, ignoreIllegals: true }).value
}

/**
 * Highlighting a large file takes hundreds of milliseconds; a blob never changes, so its highlighted
 * form is kept by hash (and language) for a while, a few dozen files at most.
 */
const highlighted = new TtlCache<string, string>(10 * 60_000, { maxEntries: 32 })

export const highlightBlob = (hash: string, text: string, path: string): Effect.Effect<string> =>
  highlighted.get(`${hash}:${text.length > HIGHLIGHT_MAX_BYTES ? "" : languageOf(path) ?? ""}`, Effect.sync(() => highlight(text, path)))
