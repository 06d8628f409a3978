/**
 * Read-only file descriptors kept open between range reads of the same file.
 * A clone reads a pack in many spans; opening and closing it for each span cost
 * two extra thread-pool trips per span. Objects are immutable by hash, so a
 * kept descriptor always reads the right bytes. Bounded in count, closed after
 * a short idle time, and dropped by `forget` once a file is deleted, so disk
 * space is released and a later read opens anew (and finds nothing).
 */
import * as fs from "node:fs"

/** At most this many files stay open (least recently used go first). */
const MAX_OPEN = 64
/** A descriptor unused this long is closed. */
const IDLE_MS = 2_000

interface Entry {
  readonly fd: Promise<number>
  users: number
  lastUsed: number
  /** Out of the map: closed when its last user is done. */
  dropped: boolean
}

const openFd = (file: string) =>
  new Promise<number>((resolve, reject) => fs.open(file, "r", (error, fd) => error ? reject(error) : resolve(fd)))

const readFd = (fd: number, buffer: Uint8Array, offset: number, length: number, position: number) =>
  new Promise<number>((resolve, reject) =>
    fs.read(fd, buffer, offset, length, position, (error, bytesRead) => error ? reject(error) : resolve(bytesRead))
  )

const closeEntry = (entry: Entry) => {
  entry.fd.then((fd) => fs.close(fd, () => {}), () => {})
}

export class OpenFiles {
  private readonly entries = new Map<string, Entry>()
  private timer: ReturnType<typeof setInterval> | undefined

  /** Up to `length` bytes of `file` from `position`; fewer only where the file ends. */
  async readRange(file: string, position: number, length: number): Promise<Uint8Array> {
    const entry = this.acquire(file)
    try {
      const fd = await entry.fd
      // Not zero-filled first (the read overwrites it; only read bytes are returned), and not a slice of
      // Buffer's shared pool, which a kept chunk would hold alive.
      const bytes = Buffer.allocUnsafeSlow(length)
      const buffer = new Uint8Array(bytes.buffer, bytes.byteOffset, length)
      let filled = 0
      while (filled < length) {
        const bytesRead = await readFd(fd, buffer, filled, length - filled, position + filled)
        if (bytesRead === 0) break
        filled += bytesRead
      }
      return filled === length ? buffer : buffer.subarray(0, filled)
    } finally {
      this.release(entry)
    }
  }

  /** Call after `file` is deleted: reads that start later open it anew. */
  forget(file: string): void {
    const entry = this.entries.get(file)
    if (entry !== undefined) this.drop(file, entry)
  }

  /** Closes every idle descriptor; those in use close when their read ends. */
  closeAll(): void {
    for (const [file, entry] of this.entries) this.drop(file, entry)
    clearInterval(this.timer)
    this.timer = undefined
  }

  private acquire(file: string): Entry {
    let entry = this.entries.get(file)
    if (entry !== undefined) {
      // Re-inserted so the map's order stays least recently used first.
      this.entries.delete(file)
    } else {
      const fd = openFd(file)
      const created: Entry = { fd, users: 0, lastUsed: 0, dropped: false }
      // A failed open (a missing object) is not kept.
      fd.catch(() => {
        if (this.entries.get(file) === created) this.entries.delete(file)
        created.dropped = true
      })
      entry = created
      if (this.entries.size >= MAX_OPEN) {
        const [oldest, old] = this.entries.entries().next().value!
        this.drop(oldest, old)
      }
    }
    this.entries.set(file, entry)
    entry.users++
    this.schedule()
    return entry
  }

  private release(entry: Entry) {
    entry.users--
    entry.lastUsed = Date.now()
    if (entry.dropped && entry.users === 0) closeEntry(entry)
  }

  private drop(file: string, entry: Entry) {
    this.entries.delete(file)
    if (entry.dropped) return
    entry.dropped = true
    if (entry.users === 0) closeEntry(entry)
  }

  private schedule() {
    if (this.timer !== undefined) return
    this.timer = setInterval(() => {
      const now = Date.now()
      for (const [file, entry] of this.entries) {
        if (entry.users === 0 && now - entry.lastUsed >= IDLE_MS) this.drop(file, entry)
      }
      if (this.entries.size === 0) {
        clearInterval(this.timer)
        this.timer = undefined
      }
    }, IDLE_MS)
    // Never keeps the process alive.
    this.timer.unref()
  }
}
