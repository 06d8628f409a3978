/**
 * The access log: one line per answered request, written straight to stdout (not through the Effect
 * logger, whose per-line machinery costs more than the request's own work on the fast reads) and in
 * batches, one write per turn of the event loop. Lines are JSON, or readable text on a terminal, as
 * the other log lines (ops/Logging.ts).
 */
import { writeSync } from "node:fs"
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

const pause = new Int32Array(new SharedArrayBuffer(4))

/**
 * Writes all of `text` to `fd` before returning. Node's stdout on a pipe or socket is non-blocking: a
 * write on the way out goes only as far as the reader's free buffer and the rest was dropped. EAGAIN
 * waits a millisecond and tries again, until the reader has taken nothing for `patienceMs` (a reader
 * that stopped reading must not hold the process forever); any other error (EPIPE) ends it.
 */
export const writeAllSync = (fd: number, text: string, patienceMs = 5000): void => {
  let data = Buffer.from(text)
  let stalledSince: number | undefined
  while (data.length > 0) {
    try {
      data = data.subarray(writeSync(fd, data))
      stalledSince = undefined
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") return
      const now = Date.now()
      stalledSince ??= now
      if (now - stalledSince > patienceMs) return
      Atomics.wait(pause, 0, 0, 1)
    }
  }
}

/**
 * The exit flush to stdout. Output Node still holds (a slow reader's earlier lines) is lost at exit: when
 * some is, the lines start on a line of their own, not glued to a cut one (a blank line if the cut fell
 * between lines).
 */
const stdoutOnExit = (text: string): void =>
  writeAllSync(process.stdout.fd ?? 1, process.stdout.writableLength > 0 ? `\n${text}` : text)

/** Lines go to stdout, or to `out` (and on exit to `outOnExit`, else `out`) when given. */
export const writer = (
  format: LogFormat,
  out?: (text: string) => void,
  outOnExit?: (text: string) => void
): AccessLogWriter => {
  const send = out ?? ((text: string) => void process.stdout.write(text))
  const sendOnExit = outOnExit ?? out ?? stdoutOnExit
  let pending: Array<string> = []
  // The ISO time of the last line's millisecond: lines of one millisecond share it (one Date and one
  // toISOString per millisecond, not per request).
  let stampedAt = -1
  let stamp = ""
  const take = (): string | undefined => {
    if (pending.length === 0) return undefined
    const lines = pending
    pending = []
    return lines.join("\n") + "\n"
  }
  const flush = () => {
    const text = take()
    if (text !== undefined) send(text)
  }
  // Lines of the turn in which the process exits (a stop after draining, process.exit) would miss their
  // setImmediate: they go out on the way out, written whole before the process ends.
  const flushOnExit = () => {
    const text = take()
    if (text !== undefined) sendOnExit(text)
  }
  let flushesOnExit = false
  return {
    write: (entry) => {
      if (pending.length === 0) {
        setImmediate(flush)
        if (!flushesOnExit) {
          flushesOnExit = true
          process.once("exit", flushOnExit)
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
