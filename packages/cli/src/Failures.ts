/**
 * Every way a `grove` command can end badly, as one error value carrying its
 * exit code. Commands fail with `CliFailure`; `Cli.run` prints it (stderr, or
 * one JSON document with `--json`) and exits with its code.
 */
import { Data } from "effect"
import { isTimeout } from "./sync/HttpSend.ts"

/** Exit codes (documented in packages/cli/README.md). */
export const ExitCode = {
  ok: 0,
  /** The server said no (400, 403, 404, 409, 412, 413, 503, unexpected answers), or a local error. */
  error: 1,
  /** Bad flags or arguments. */
  usage: 2,
  /** Conflicts: a pull left conflict markers, a merge conflicts with main, or a revert with later changes. */
  conflict: 5,
  /** Cannot connect, 401, or no credential. */
  auth: 6
} as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

export class CliFailure extends Data.TaggedError("CliFailure")<{
  readonly message: string
  readonly exitCode: ExitCode
  /** Machine-readable: the server's `code`, or one of ours (`usage`, `network`, `no_credential`, ...). */
  readonly code: string
  /** Extra fields for the JSON error document (e.g. `operation_id`, `conflict_paths`). */
  readonly details?: Readonly<Record<string, unknown>> | undefined
  /** A network failure that was a timeout, already tried again once (Retry.ts): callers do not try it again. */
  readonly timedOut?: boolean | undefined
}> {}

export const usage = (message: string) => new CliFailure({ message, exitCode: ExitCode.usage, code: "usage" })

export const failure = (message: string, code = "error", details?: Readonly<Record<string, unknown>>) =>
  new CliFailure({ message, exitCode: ExitCode.error, code, details })

export const authFailure = (message: string, code: string) => new CliFailure({ message, exitCode: ExitCode.auth, code })

/**
 * A request that failed in the network (exit 6, code `network`), under the error it failed with (node:http's, or
 * fetch's with the socket's error as its cause). "cannot connect to" only when no connection was made: sync/HttpSend.ts
 * marks its errors `connected`; an error without the mark (fetch's) reads as one that never connected.
 */
export const networkFailure = (remote: string, error: unknown): CliFailure => {
  const cause = error instanceof Error ? error : undefined
  const detail = cause?.cause instanceof Error ? cause.cause.message : cause?.message
  const connected = typeof error === "object" && error !== null && (error as { connected?: unknown }).connected === true
  return new CliFailure({
    message: `${connected ? "network failure talking to" : "cannot connect to"} ${remote}${detail === undefined ? "" : `: ${detail}`}`,
    exitCode: ExitCode.auth,
    code: "network",
    timedOut: isTimeout(error)
  })
}

/** The JSON document printed for a failure with `--json`. */
export const toJson = (failure: CliFailure): Record<string, unknown> => ({
  error: failure.message,
  code: failure.code,
  ...failure.details
})
