/**
 * Writing the files of a fresh checkout (a clone) where they go, as their bytes arrive: one
 * synchronous open (O_CREAT|O_EXCL), write, fstat and close per file. No temp file, no rename and
 * no stat afterwards: that costs about a quarter of the CPU of a promise write into a temp
 * directory renamed into place later (5,000 files: ~75 ms against ~300 ms, most of it thread-pool
 * wake-ups; scripts/bench/content). Only where nothing is yet: an existing path (or one that
 * cannot be written) is left to `applySnapshot`, which replaces files through temp files.
 */
import type { Stats } from "node:fs"
import * as fs from "node:fs"
import * as path from "node:path"
import type { IndexEntry } from "./IndexFile.ts"
import { entryOf } from "./IndexFile.ts"
import type { Snapshot } from "./WorkingTree.ts"

const MODE_BITS = { regular: 0o644, executable: 0o755 } as const

export interface Placer {
  /**
   * Writes verified bytes of blob `hash` at every path of the snapshot that holds it. True when
   * every one was written; false leaves the unwritten ones to `applySnapshot` (which then needs the bytes).
   */
  readonly place: (hash: string, data: Uint8Array) => boolean
  /** The index entry of every file written so far. */
  readonly placed: ReadonlyMap<string, IndexEntry>
}

/** One new file at `target` (which must not exist), with the snapshot's mode exactly (as `applySnapshot` sets it). */
const writeNew = (target: string, mode: "regular" | "executable", data: Uint8Array): Stats => {
  const bits = MODE_BITS[mode]
  const fd = fs.openSync(target, "wx", bits)
  try {
    for (let at = 0; at < data.length;) at += fs.writeSync(fd, data, at, data.length - at)
    let stats = fs.fstatSync(fd)
    // The umask may have taken bits away.
    if ((stats.mode & 0o777) !== bits) {
      fs.fchmodSync(fd, bits)
      stats = fs.fstatSync(fd)
    }
    return stats
  } catch (error) {
    // Made here and not whole (ENOSPC, EIO): never left looking like the file.
    fs.rmSync(target, { force: true })
    throw error
  } finally {
    fs.closeSync(fd)
  }
}

/** A placer for the files of `to` under `root`, where none of them exists yet. */
export const directPlacer = (root: string, to: Snapshot): Placer => {
  const targets = new Map<string, Array<string>>()
  for (const [file, entry] of to) {
    const list = targets.get(entry.hash)
    if (list === undefined) targets.set(entry.hash, [file])
    else list.push(file)
  }
  const placed = new Map<string, IndexEntry>()
  const madeDirs = new Set<string>()
  const base = root.endsWith(path.sep) ? root : `${root}${path.sep}`
  const place: Placer["place"] = (hash, data) => {
    let all = true
    for (const file of targets.get(hash) ?? []) {
      if (placed.has(file)) continue
      const entry = to.get(file)!
      // A snapshot's path is already normal ("/"-separated names, none empty, "." or ".."): joined and cut by hand,
      // not by path.join and path.dirname, which normalize the whole path again (~2 us a file).
      const slash = file.lastIndexOf("/")
      const dir = slash === -1 ? root : `${base}${file.slice(0, slash)}`
      const target = `${base}${file}`
      try {
        if (!madeDirs.has(dir)) {
          fs.mkdirSync(dir, { recursive: true })
          madeDirs.add(dir)
        }
        if (entry.mode === "symlink") {
          fs.symlinkSync(Buffer.from(data.buffer, data.byteOffset, data.length).toString("utf8"), target)
          placed.set(file, entryOf(hash, entry.mode, fs.lstatSync(target)))
        } else placed.set(file, entryOf(hash, entry.mode, writeNew(target, entry.mode, data)))
      } catch {
        all = false // applySnapshot writes it (or reports why it cannot)
      }
    }
    return all
  }
  return { placed, place }
}
