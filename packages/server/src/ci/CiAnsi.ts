/**
 * A step's terminal output as HTML: SGR colours (30-37, 90-97) and bold become CSS classes
 * (`a-f31`, `a-b`), never inline styles, so the pages' CSP stays strict; every other escape sequence
 * (cursor moves, erase, titles) is dropped, and all text is escaped. The state (open colour, bold,
 * a sequence cut in half) carries from one piece of a log to the next, as the runner writes pieces.
 */
import { escapeHtml } from "../web/Html.ts"

export interface AnsiState {
  readonly fg: number | undefined
  readonly bold: boolean
  /** The start of an escape sequence that the piece ended in the middle of. */
  readonly pending: string
}

export const PLAIN: AnsiState = { fg: undefined, bold: false, pending: "" }

// oxlint-disable-next-line no-control-regex -- escape sequences are what this reads
const SEQUENCE = /\x1b\[([0-?]*)([ -/]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g
// oxlint-disable-next-line no-control-regex -- an escape sequence not finished at the end of a piece
const UNFINISHED = /\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?)?$/

/** The state after one SGR sequence's parameters. */
const applySgr = (state: AnsiState, params: string): AnsiState => {
  let { fg, bold } = state
  const codes = params === "" ? [0] : params.split(";").map((p) => (p === "" ? 0 : Number(p)))
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i]!
    if (code === 0) {
      fg = undefined
      bold = false
    } else if (code === 1) bold = true
    else if (code === 22) bold = false
    else if (code === 39) fg = undefined
    else if ((code >= 30 && code <= 37) || (code >= 90 && code <= 97)) fg = code
    // 256-colour and true-colour forms: their arguments are not colours of ours (38;5;31 is not red).
    else if (code === 38 || code === 48) i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 0
  }
  return { fg, bold, pending: "" }
}

const classesOf = (state: AnsiState): string =>
  [state.bold ? "a-b" : "", state.fg === undefined ? "" : `a-f${state.fg}`].filter((c) => c !== "").join(" ")

/** `text` (a piece of a log) as escaped HTML in the classes of `state`, and the state after it. */
export const ansiToHtml = (text: string, state: AnsiState = PLAIN): { readonly html: string; readonly state: AnsiState } => {
  let input = state.pending + text
  const unfinished = UNFINISHED.exec(input)
  const pending = unfinished === null ? "" : unfinished[0]
  if (pending !== "") input = input.slice(0, input.length - pending.length)
  input = input.replace(/\r\n/g, "\n")
  const out: Array<string> = []
  let current: AnsiState = { ...state, pending: "" }
  const emit = (chunk: string) => {
    if (chunk === "") return
    const classes = classesOf(current)
    out.push(classes === "" ? escapeHtml(chunk) : `<span class="${classes}">${escapeHtml(chunk)}</span>`)
  }
  let at = 0
  for (const match of input.matchAll(SEQUENCE)) {
    emit(input.slice(at, match.index))
    at = match.index + match[0].length
    if (match[3] === "m" && match[2] === "") current = applySgr(current, match[1] ?? "")
  }
  emit(input.slice(at))
  return { html: out.join(""), state: { ...current, pending } }
}

/**
 * The last `lines` lines of a log as HTML, with the colours in force where they start, and whether
 * lines were left out.
 */
export const tailToHtml = (text: string, lines: number): { readonly html: string; readonly cut: boolean; readonly state: AnsiState } => {
  let start = text.length
  for (let n = 0; n < lines && start > 0; n++) {
    // The newline before `start` ends the line above it (a final newline ends the last line): look past it.
    const from = text[start - 1] === "\n" ? start - 2 : start - 1
    start = from < 0 ? 0 : text.lastIndexOf("\n", from) + 1
  }
  const before = start === 0 ? PLAIN : ansiToHtml(text.slice(0, start)).state
  const rendered = ansiToHtml(text.slice(start), { ...before, pending: "" })
  return { html: rendered.html, cut: start > 0, state: rendered.state }
}

/**
 * The colours in force at the end of each step's log on a page, for the live events that continue it:
 * `{"<step>":[fg,bold,pending]}`, only the steps not plain. The events read it back with `parseStates`.
 */
export const encodeStates = (states: ReadonlyMap<number, AnsiState>): string | undefined => {
  const out: Record<string, readonly [number, 0 | 1, string]> = {}
  for (const [step, state] of states) {
    if (state.fg !== undefined || state.bold || state.pending !== "") out[step] = [state.fg ?? 0, state.bold ? 1 : 0, state.pending]
  }
  return Object.keys(out).length === 0 ? undefined : JSON.stringify(out)
}

const COLOUR = (fg: unknown): fg is number => typeof fg === "number" && ((fg >= 30 && fg <= 37) || (fg >= 90 && fg <= 97))

/** `encodeStates`' text back; anything malformed counts as plain (it only colours text). */
export const parseStates = (text: string | null | undefined): Map<number, AnsiState> => {
  const states = new Map<number, AnsiState>()
  if (text === null || text === undefined || text.length > 4096) return states
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return states
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return states
  for (const [step, value] of Object.entries(parsed)) {
    if (!/^[1-9][0-9]{0,9}$/.test(step) || !Array.isArray(value) || value.length !== 3) continue
    const [fg, bold, pending] = value as Array<unknown>
    const unfinished = typeof pending === "string" && pending.length <= 64 && (pending === "" || UNFINISHED.exec(pending)?.[0] === pending)
    if (!unfinished) continue
    states.set(Number(step), { fg: COLOUR(fg) ? fg : undefined, bold: bold === 1, pending })
  }
  return states
}
