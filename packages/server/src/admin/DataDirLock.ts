/**
 * Only one process may open an embedded data directory (PGlite is single
 * process). The lock file holds the owner's pid; a lock left by a dead process
 * is taken over.
 */
import { PgliteInit } from "@grove/storage"
import { Cause, Data, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

export class DataDirBusy extends Data.TaggedError("DataDirBusy")<{ readonly pid: number; readonly dataDir: string }> {}

const alive = PgliteInit.processAlive

const tryLock = (file: string): number | undefined => {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = fs.openSync(file, "wx", 0o600)
      fs.writeSync(fd, String(process.pid))
      fs.closeSync(fd)
      return undefined
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      const pid = Number(fs.readFileSync(file, "utf8").trim())
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) return pid
      fs.rmSync(file, { force: true })
    }
  }
  return -1
}

/** The pid of the live process holding the data directory, if one does (checked before a start, for a clear message). */
export const holder = (dataDir: string): number | undefined => {
  let pid: number
  try {
    pid = Number(fs.readFileSync(path.join(dataDir, "server.lock"), "utf8").trim())
  } catch {
    return undefined
  }
  return Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid) ? pid : undefined
}

/** Holds the lock for the scope's lifetime. */
export const acquire = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      yield* Effect.sync(() => fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 }))
      const file = path.join(dataDir, "server.lock")
      const holder = yield* Effect.sync(() => tryLock(file))
      if (holder !== undefined) return yield* new DataDirBusy({ pid: holder, dataDir })
      return file
    }),
    (file) => Effect.sync(() => fs.rmSync(file, { force: true }))
  )

/**
 * What an admin command (migrate, fsck, ...) says when it failed: a data directory a running server
 * holds is named with its pid and `hint`; anything else by its message.
 */
export const failureMessage = (cause: Cause.Cause<unknown>, dataDir: string, hint = ""): string => {
  const error = Cause.squash(cause) as { _tag?: string; message?: string; pid?: number } | undefined
  return error?._tag === "DataDirBusy"
    ? `the data directory ${dataDir} is in use by a running grove-server (pid ${error.pid}): stop it first${hint}`
    : error?.message ?? String(cause)
}
