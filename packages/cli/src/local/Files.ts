/**
 * File helpers of the local repository model without Effect (Io.ts re-exports them with `io`): JSON state is
 * replaced atomically (temp file + rename) so a crash never leaves half a file. The small push (SmallPush.ts)
 * uses them before the client loads.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"

export const errorMessage = (error: unknown): string => error instanceof Error ? error.message : String(error)

export const isMissing = (error: unknown): boolean => (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT"

/** The file's text, or undefined when it does not exist. */
export const readTextIfExists = (file: string): Promise<string | undefined> =>
  fs.readFile(file, "utf8").then((text): string | undefined => text, (error) => {
    if (isMissing(error)) return undefined
    throw error
  })

/** Writes through a temp file in the same directory and renames it into place. */
export const writeAtomic = async (file: string, data: string | Uint8Array): Promise<void> => {
  await fs.mkdir(path.dirname(file), { recursive: true })
  const temp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  try {
    await fs.writeFile(temp, data)
    await fs.rename(temp, file)
  } catch (error) {
    await fs.rm(temp, { force: true })
    throw error
  }
}

export const writeJsonAtomic = (file: string, value: unknown): Promise<void> => writeAtomic(file, `${JSON.stringify(value)}\n`)

/** `writeAtomic`, answering the written file's stat (taken before the rename, which keeps inode, size and mtime). */
export const writeAtomicStat = async (file: string, data: string | Uint8Array): Promise<import("node:fs").Stats> => {
  await fs.mkdir(path.dirname(file), { recursive: true })
  const temp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  try {
    const handle = await fs.open(temp, "w")
    let stats: import("node:fs").Stats
    try {
      await handle.writeFile(data)
      stats = await handle.stat()
    } finally {
      await handle.close()
    }
    await fs.rename(temp, file)
    return stats
  } catch (error) {
    await fs.rm(temp, { force: true })
    throw error
  }
}

export const exists = (file: string): Promise<boolean> => fs.lstat(file).then(() => true, () => false)

/**
 * Writes many files on the thread pool, at most `limit` (and `maxBytes`) at once: creating a file
 * waits on the disk (journal, directory locks), and those waits overlap instead of adding up as they
 * do one synchronous write after another. `write` waits while the pool is full; `drain` waits for
 * the rest and fails with the first error; `settle` only waits (for clean-up after a failure).
 */
export const concurrentWrites = (limit = 8, maxBytes = 32 * 1024 * 1024) => {
  const pending = new Set<Promise<void>>()
  let bytes = 0
  let failure: { readonly error: unknown } | undefined
  const raise = () => {
    if (failure !== undefined) throw failure.error
  }
  return {
    write: async (file: string, data: Uint8Array, then?: () => Promise<void>): Promise<void> => {
      while (pending.size > 0 && (pending.size >= limit || bytes + data.length > maxBytes)) await Promise.race(pending)
      raise()
      bytes += data.length
      const done: Promise<void> = fs.writeFile(file, data).then(then).then(
        () => undefined,
        (error: unknown) => void (failure ??= { error })
      ).finally(() => {
        pending.delete(done)
        bytes -= data.length
      })
      pending.add(done)
    },
    drain: async (): Promise<void> => {
      await Promise.all(pending)
      raise()
    },
    settle: (): Promise<unknown> => Promise.all(pending)
  }
}
