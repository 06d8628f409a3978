/**
 * The poison-command policy: how a failed attempt at a command's transaction
 * is treated. Only what can pass is retried: a lost connection, a
 * serialization failure, a deadlock, a lock or statement timeout, a database
 * shutting down or starting up. Anything
 * else (a constraint the command breaks, text PostgreSQL cannot store, a
 * defect) fails the same way every time, so the command is settled as failed
 * and the partition moves on. A stale owner (fenced) stops.
 *
 * A failed transaction's ROLLBACK on a dead connection fails too, and the SQL
 * client turns that into a defect: SQL errors are looked for among defects
 * as well as failures.
 */
import { Cause, Duration } from "effect"
import { Fenced } from "./PartitionFence.ts"

export type Verdict =
  | { readonly _tag: "Interrupted" }
  | { readonly _tag: "Fenced"; readonly fenced: Fenced }
  /** Worth another attempt. `connection`: the database could not be reached, which says nothing about the command. */
  | { readonly _tag: "Transient"; readonly connection: boolean; readonly message: string }
  | { readonly _tag: "Poison"; readonly message: string }

interface SqlErrorLike {
  readonly _tag: "SqlError"
  readonly message: string
  readonly isRetryable: boolean
  readonly reason: { readonly _tag: string }
}

const isSqlError = (value: unknown): value is SqlErrorLike =>
  typeof value === "object" && value !== null && (value as { _tag?: unknown })._tag === "SqlError" &&
  typeof (value as { reason?: unknown }).reason === "object"

/** The values a cause failed or died with, SQL errors wrapped in other errors' `cause` included. */
const culprits = (cause: Cause.Cause<unknown>): ReadonlyArray<unknown> => {
  const found: Array<unknown> = []
  const add = (value: unknown, depth: number) => {
    found.push(value)
    const inner = typeof value === "object" && value !== null ? (value as { cause?: unknown }).cause : undefined
    if (inner !== undefined && depth < 4) add(inner, depth + 1)
  }
  for (const reason of cause.reasons) {
    if (Cause.isFailReason(reason)) add(reason.error, 0)
    else if (Cause.isDieReason(reason)) add(reason.defect, 0)
  }
  return found
}

/**
 * SQLSTATE classes of a database that is away, not of a statement that is wrong: connection exceptions
 * (08), an administrator's or a crash's shutdown and a server starting up (57P01-57P03), insufficient
 * resources (53), system errors (58). The driver reports most of these as `UnknownError`.
 */
const UNAVAILABLE_SQLSTATE = /^(08|53|58|57P0[1-3])/

/** Whether a database error says the database cannot be used right now (as opposed to this statement failing). */
export const isDatabaseUnavailable = (error: unknown): boolean => {
  if (!isSqlError(error)) return false
  if (error.reason._tag === "ConnectionError") return true
  const code = ((error.reason as { readonly cause?: unknown }).cause as { readonly code?: unknown } | undefined)?.code
  return typeof code === "string" && UNAVAILABLE_SQLSTATE.test(code)
}

/** Whether a database error may pass if tried again: the database is away, or a conflict with another transaction. */
export const isTransientSqlError = (error: unknown): boolean =>
  isSqlError(error) && (error.isRetryable || isDatabaseUnavailable(error))

const describe = (value: unknown): string => {
  if (isSqlError(value)) {
    // The driver's own message (e.g. PostgreSQL's) says more than the wrapper's.
    const inner = (value.reason as { readonly cause?: unknown }).cause
    const detail = inner instanceof Error && inner.message !== value.message ? ` (${inner.message})` : ""
    return `${value.reason._tag}: ${value.message}${detail}`
  }
  if (value instanceof Error) return value.message
  if (typeof value === "object" && value !== null && "_tag" in value) return String((value as { _tag: unknown })._tag)
  return String(value)
}

export const classify = (cause: Cause.Cause<unknown>): Verdict => {
  if (Cause.hasInterruptsOnly(cause)) return { _tag: "Interrupted" }
  const values = culprits(cause)
  const fenced = values.find((value): value is Fenced => value instanceof Fenced)
  if (fenced !== undefined) return { _tag: "Fenced", fenced }
  const sql = values.filter(isSqlError)
  const transient = sql.find(isTransientSqlError)
  if (transient !== undefined) {
    return { _tag: "Transient", connection: isDatabaseUnavailable(transient), message: describe(transient) }
  }
  const first = sql[0] ?? values[0]
  return { _tag: "Poison", message: first === undefined ? "the command failed" : describe(first) }
}

/** Attempts at a command failing with transient errors other than a lost connection, before it is settled as failed. */
export const maxAttempts = 10

/** The wait before retry `attempt` (0-based): doubling from 50 ms, at most 1 s, so a recovered database is used within a second. */
export const backoff = (attempt: number): Duration.Duration => Duration.millis(Math.min(1000, 50 * 2 ** Math.min(attempt, 5)))
