/**
 * File-system helpers for the local repository model: every I/O error becomes a
 * `CliFailure` (exit 1, code `local_io`) naming what was being done, and JSON
 * state is replaced atomically (temp file + rename) so a crash never leaves half
 * a file.
 */
import { Effect } from "effect"
import { failure } from "../Failures.ts"
import type { CliFailure } from "../Failures.ts"
import { errorMessage } from "./Files.ts"

export * from "./Files.ts"

/** Runs a promise; a rejection is a local failure that says what was being done. */
export const io = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, CliFailure> =>
  Effect.tryPromise({ try: run, catch: (error) => failure(`${what}: ${errorMessage(error)}`, "local_io") })
