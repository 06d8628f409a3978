/**
 * Log lines: JSON, one object per line, when stdout is not a terminal (a log shipper reads them), and
 * Effect's readable lines on a terminal; `--log-format` chooses. A line written while a request is
 * served carries its request id (ops/RequestRecord.ts); the partition workers' lines carry their topic
 * and partition, and the command's id where it is known, as log annotations. While tracing is on, a JSON
 * line written inside a span carries its `trace_id` (the access log's lines too).
 */
import { Context, Logger, References, Tracer } from "effect"
import type { Fiber } from "effect"
import { recordIn } from "../http/RequestRecord.ts"

export type LogFormat = "json" | "text"

const requestIdOf = (context: Context.Context<never>) => recordIn(context)?.id

/** The trace of the span the line is written in, while tracing is on (ops/Tracing.ts): logs and traces meet. */
const traceIdOf = (fiber: Fiber.Fiber<unknown, unknown>) => {
  if (!fiber.getRef(References.TracerEnabled)) return undefined
  const span = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
  return span?._tag === "Span" ? span.traceId : undefined
}

const jsonLogger = Logger.make((options) => {
  const structured = Logger.formatStructured.log(options)
  const requestId = requestIdOf(options.fiber.context)
  const traceId = traceIdOf(options.fiber)
  process.stdout.write(
    JSON.stringify({
      timestamp: structured.timestamp,
      level: structured.level,
      message: structured.message,
      ...(requestId === undefined ? {} : { request_id: requestId }),
      ...(traceId === undefined ? {} : { trace_id: traceId }),
      ...structured.annotations,
      ...(structured.cause === undefined ? {} : { cause: structured.cause })
    }) + "\n"
  )
})

const textLogger = Logger.make((options) => {
  const requestId = requestIdOf(options.fiber.context)
  if (requestId === undefined) return Logger.defaultLogger.log(options)
  const message = Array.isArray(options.message) ? options.message : [options.message]
  return Logger.defaultLogger.log({ ...options, message: [...message, `request_id=${requestId}`] })
})

/** Replaces the default logger for the whole server. */
export const layer = (format: LogFormat) => Logger.layer([format === "json" ? jsonLogger : textLogger])
