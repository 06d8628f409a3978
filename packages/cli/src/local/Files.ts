/**
 * File helpers of the local repository model without Effect (Io.ts re-exports them with `io`): JSON state is
 * replaced atomically (temp file + rename) so a crash never leaves half a file. The small push (SmallPush.ts)
 * uses them before the client loads, so they take node:fs's callbacks, not node:fs/promises, and random bytes from
 * /dev/urandom, not node:crypto: loading those two is ~8 ms of the small push's CPU.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** `f` with a Node callback as a promise. */
const call = <A = void>(f: (done: (error: NodeJS.ErrnoException | null, value?: A) => void) => void): Promise<A> =>
  new Promise<A>((resolve, reject) => f((error, value) => error === null ? resolve(value as A) : reject(error)))

/** `size` random bytes, cryptographically strong: from /dev/urandom, or node:crypto where there is none. */
export const randomBytes = (size: number): Buffer => {
  const bytes = Buffer.alloc(size)
  try {
    const fd = fs.openSync("/dev/urandom", "r")
    try {
      for (let read = 0; read < size;) {
        const n = fs.readSync(fd, bytes, read, size - read, null)
        if (n <= 0) throw new Error("/dev/urandom ended")
        read += n
      }
    } finally {
      fs.closeSync(fd)
    }
    return bytes
  } catch {
    return process.getBuiltinModule("node:crypto").randomBytes(size)
  }
}

/** A random (version 4) UUID, as crypto.randomUUID makes. */
export const randomUuid = (): string => {
  const b = randomBytes(16)
  b[6] = (b[6]! & 0x0f) | 0x40
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = b.toString("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

export const errorMessage = (error: unknown): string => error instanceof Error ? error.message : String(error)

export const isMissing = (error: unknown): boolean => (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT"

/** The file's text, or undefined when it does not exist. */
export const readTextIfExists = (file: string): Promise<string | undefined> =>
  call<string>((done) => fs.readFile(file, "utf8", done)).then((text): string | undefined => text, (error) => {
    if (isMissing(error)) return undefined
    throw error
  })

/** Writes through a temp file in the same directory and renames it into place. */
export const writeAtomic = async (file: string, data: string | Uint8Array): Promise<void> => {
  await call<string | undefined>((done) => fs.mkdir(path.dirname(file), { recursive: true }, done))
  const temp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  try {
    await call((done) => fs.writeFile(temp, data, done))
    await call((done) => fs.rename(temp, file, done))
  } catch (error) {
    await call((done) => fs.rm(temp, { force: true }, done))
    throw error
  }
}

export const writeJsonAtomic = (file: string, value: unknown): Promise<void> => writeAtomic(file, `${JSON.stringify(value)}\n`)

/** `writeAtomic`, answering the written file's stat (taken before the rename, which keeps inode, size and mtime). */
export const writeAtomicStat = async (file: string, data: string | Uint8Array): Promise<fs.Stats> => {
  await call<string | undefined>((done) => fs.mkdir(path.dirname(file), { recursive: true }, done))
  const temp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  try {
    const fd = await call<number>((done) => fs.open(temp, "w", done))
    let stats: fs.Stats
    try {
      await call((done) => fs.writeFile(fd, data, done))
      stats = await call<fs.Stats>((done) => fs.fstat(fd, done))
    } finally {
      await call((done) => fs.close(fd, done))
    }
    await call((done) => fs.rename(temp, file, done))
    return stats
  } catch (error) {
    await call((done) => fs.rm(temp, { force: true }, done))
    throw error
  }
}

export const exists = (file: string): Promise<boolean> => call<fs.Stats>((done) => fs.lstat(file, done)).then(() => true, () => false)

/**
 * Writes many files on the thread pool, at most `limit` (and `maxBytes`) at once: creating a file
 * waits on the disk (journal, directory locks), and those waits overlap instead of adding up as they
 * do one synchronous write after another. `write` waits while the pool is full; `drain` waits for
 * the rest and fails with the first error; `settle` only waits (for clean-up after a failure).
 * `write` settles once the write is queued, so it writes a copy of `data`: the caller's bytes may be a view of a
 * buffer it refills at once (a chunk answer read off StreamSocket's one reused buffer).
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
      const owned = Buffer.from(data)
      const done: Promise<void> = call((written) => fs.writeFile(file, owned, written)).then(then).then(
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
