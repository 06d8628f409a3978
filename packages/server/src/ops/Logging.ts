/**
 * Log lines: JSON, one object per line, when stdout is not a terminal (a log shipper reads them), and
 * Effect's readable lines on a terminal; `--log-format` chooses. A line written while a request is
 * served carries its request id (ops/RequestRecord.ts); the partition workers' lines carry their topic
 * and partition, and the command's id where it is known, as log annotations.
 */
import type { Context } from "effect"
import { Logger } from "effect"
import { recordIn } from "../http/RequestRecord.ts"

export type LogFormat = "json" | "text"

const requestIdOf = (context: Context.Context<never>) => recordIn(context)?.id

const jsonLogger = Logger.make((options) => {
  const structured = Logger.formatStructured.log(options)
  const requestId = requestIdOf(options.fiber.context)
  process.stdout.write(
    JSON.stringify({
      timestamp: structured.timestamp,
      level: structured.level,
      message: structured.message,
      ...(requestId === undefined ? {} : { request_id: requestId }),
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
