/**
 * The access log: one line per answered request, written straight to stdout (not through the Effect
 * logger, whose per-line machinery costs more than the request's own work on the fast reads) and in
 * batches, one write per turn of the event loop. Lines are JSON, or readable text on a terminal, as
 * the other log lines (ops/Logging.ts).
 */
import type { LogFormat } from "./Logging.ts"

export interface AccessEntry {
  readonly requestId: string
  readonly method: string
  /** The route template (`/api/:owner/:name`), never the path: it may name private repositories. */
  readonly route: string
  readonly status: number
  readonly seconds: number
  /** The body's length when known before it is sent; undefined for a streamed body. */
  readonly bytes: number | undefined
  readonly caller: string | undefined
  /** The request's trace, while tracing is on (ops/Tracing.ts). */
  readonly traceId?: string | undefined
}

/** Printable ASCII but the quote and the backslash: the JSON string of such a text is the text in quotes. */
const PLAIN_TEXT = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/
const jsonString = (text: string): string => PLAIN_TEXT.test(text) ? `"${text}"` : JSON.stringify(text)
/** A number as JSON.stringify writes it (null when not finite). */
const jsonNumber = (value: number): string => Number.isFinite(value) ? `${value}` : "null"

/**
 * One line; `timestamp`: the ISO time it was written (the writer makes one per millisecond). The JSON
 * line is the text `JSON.stringify` makes of the entry's object, written out directly: the object
 * (and its spread) cost twice the time on every answered request.
 */
export const formatEntry = (format: LogFormat, entry: AccessEntry, timestamp: string): string => {
  const ms = Math.round(entry.seconds * 1e6) / 1e3
  if (format === "json") {
    return `{"timestamp":${jsonString(timestamp)},"level":"INFO","message":"request","request_id":${jsonString(entry.requestId)}` +
      `,"method":${jsonString(entry.method)},"route":${jsonString(entry.route)},"status":${jsonNumber(entry.status)}` +
      `,"duration_ms":${jsonNumber(ms)},"bytes":${entry.bytes === undefined ? "null" : jsonNumber(entry.bytes)}` +
      `,"caller":${entry.caller === undefined ? "null" : jsonString(entry.caller)}` +
      `${entry.traceId === undefined ? "" : `,"trace_id":${jsonString(entry.traceId)}`}}`
  }
  return `[${timestamp}] ${entry.method} ${entry.route} ${entry.status} ${ms}ms ` +
    `${entry.bytes === undefined ? "-" : `${entry.bytes}B`} ${entry.caller ?? "-"} request_id=${entry.requestId}` +
    (entry.traceId === undefined ? "" : ` trace_id=${entry.traceId}`)
}

export interface AccessLogWriter {
  readonly write: (entry: AccessEntry) => void
}

export const writer = (format: LogFormat, out: (text: string) => void = (text) => process.stdout.write(text)): AccessLogWriter => {
  let pending: Array<string> = []
  // The ISO time of the last line's millisecond: lines of one millisecond share it (one Date and one
  // toISOString per millisecond, not per request).
  let stampedAt = -1
  let stamp = ""
  const flush = () => {
    if (pending.length === 0) return
    const lines = pending
    pending = []
    out(lines.join("\n") + "\n")
  }
  // Lines of the turn in which the process exits (a stop after draining, process.exit) would miss their
  // setImmediate: they go out on the way out (a write to a pipe, file or terminal is synchronous here).
  let flushesOnExit = false
  return {
    write: (entry) => {
      if (pending.length === 0) {
        setImmediate(flush)
        if (!flushesOnExit) {
          flushesOnExit = true
          process.once("exit", flush)
        }
      }
      const now = Date.now()
      if (now !== stampedAt) {
        stampedAt = now
        stamp = new Date(now).toISOString()
      }
      pending.push(formatEntry(format, entry, stamp))
    }
  }
}
