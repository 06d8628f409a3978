/**
 * A clone's chunks verified and written on a second thread (PlaceWorker.ts) while the main thread reads the
 * answers: naming each chunk (BLAKE3) and writing its files is most of the client's CPU in a clone of many small
 * files, and the main thread otherwise does it between socket reads. The main thread hands over each part of a bare
 * frame answer as it arrives (a copy: the socket's buffer is node's) and takes back what the worker does not place
 * itself. Opt-in (GROVE_PLACE_THREAD=1), for a fresh checkout's placer (Placing.ts) with the worker's file found
 * (the sources, or the bundle's `place-worker.mjs`); anywhere else the main thread places as before. The worker costs
 * ~0.1 s of CPU more than it takes off the main thread (its start, the copies), and no measurement here showed the
 * clone faster for it: 5k files / 50 MiB on 2 cores, client CPU 0.82 -> 0.93 s and wall 2.50 -> 3.15 s at load 22;
 * wall 0.82x once at load 14-18, 1.09x and 1.26x in other runs; the bench's clone row 1.16x (off) vs 1.27x (on) at load
 * ~1, git's own clone swinging 1.0-2.4 s. A gate on the host's idle CPU was tried and dropped: it cannot see a cgroup's
 * CPU quota (a container on an idle many-core host would start the worker and lose). Until a machine with a core
 * free shows the gain, it is off unless asked for.
 */
import * as fs from "node:fs"
import type { Worker } from "node:worker_threads"
import type { BlobMode, IndexEntry } from "./IndexFile.ts"
import type { Snapshot } from "./WorkingTree.ts"

/** What the worker is started with. */
export interface PlaceSetup {
  readonly root: string
  readonly to: Snapshot
  /** Every chunk of the download and its size. */
  readonly sizes: ReadonlyMap<string, number>
  /** The blobs that are one chunk of their own: the worker places these. */
  readonly single: ReadonlyArray<string>
}

/**
 * The worker's setup as sent: flat arrays (a structured clone of 5,000 files as a Map of objects costs ~17 ms, as
 * arrays ~3 ms), and the slots of shared memory.
 */
export interface WorkerSetup {
  readonly root: string
  /** `to`'s files, and each one's hash and mode. */
  readonly files: ReadonlyArray<string>
  readonly hashes: ReadonlyArray<string>
  readonly modes: ReadonlyArray<BlobMode>
  /** The chunks and their sizes. */
  readonly chunks: ReadonlyArray<string>
  readonly sizes: ReadonlyArray<number>
  readonly single: ReadonlyArray<string>
  readonly shared: SharedArrayBuffer
  readonly slotBytes: number
}

/** The stat values of a placed file's index entry, four per file (see `placedEntries`). */
export const STAT_VALUES = 4

/**
 * A bare frame names its chunk by its bytes: bytes that name no chunk asked for were damaged (on the way or on the
 * server), as a flipped byte is; the same chunk a second time is the server's mistake.
 */
export const strayChunk = (hash: string, again: boolean): Error =>
  new Error(
    again
      ? `the server sent chunk ${hash} twice`
      : `the server sent corrupt bytes: a chunk of its answer hashes to ${hash}, which is none of the chunks asked for`
  )

export type ToWorker =
  | { readonly t: "begin"; readonly batch: number }
  /** A slot's first `length` bytes are the answer's next bytes. */
  | { readonly t: "part"; readonly batch: number; readonly slot: number; readonly length: number }
  | { readonly t: "end"; readonly batch: number; readonly complete: boolean }
  | { readonly t: "finish" }

export type FromWorker =
  | { readonly t: "free"; readonly slot: number }
  /** A frame for the main thread to take: named when raw, else zstd as sent. */
  | { readonly t: "chunk"; readonly batch: number; readonly hash: string | undefined; readonly data: Uint8Array; readonly zstd: boolean }
  | { readonly t: "ended"; readonly batch: number; readonly placed: ReadonlyArray<string> }
  | { readonly t: "failed"; readonly message: string }
  /** The files the worker wrote, and their size, mtimeMs, ino and ctimeMs (STAT_VALUES each). */
  | { readonly t: "finished"; readonly files: ReadonlyArray<string>; readonly stats: Float64Array }

export interface PlaceThread {
  /** A new answer for `batch` (after a broken one, the frames start afresh). */
  readonly begin: (batch: number) => void
  /** Hands a part over; a promise while every slot is the worker's. Throws once the worker failed. */
  readonly part: (batch: number, part: Uint8Array) => Promise<void> | undefined
  /** The answer ended (`complete`: all of it); the chunks the worker placed from it, once it has taken every part. */
  readonly end: (batch: number, complete: boolean) => Promise<ReadonlyArray<string>>
  /** The index entries of the files the worker wrote, once every answer has ended. */
  readonly finish: () => Promise<ReadonlyArray<readonly [string, IndexEntry]>>
  /** Ends the worker; once this settles it writes nothing more. */
  readonly stop: () => Promise<void>
}

/**
 * The parts of the answers are copied into slots of memory shared with the worker (one copy, no allocation: a
 * buffer per part, or a message per ~64 KiB network read, cost more), and a slot is handed over once full or at an
 * answer's end; the worker gives it back once it has taken it. With every slot handed over, the answers wait.
 */
const SLOT_BYTES = 1024 * 1024
const SLOTS = 16
/** The worker's module: the sources' own file, or the bundle's entry (dist/, chunks in dist/chunks/). */
const workerFile = (): URL | undefined => {
  try {
    const candidates = import.meta.url.endsWith(".ts")
      ? [new URL("./PlaceWorker.ts", import.meta.url)]
      : [new URL("../place-worker.mjs", import.meta.url), new URL("./place-worker.mjs", import.meta.url)]
    return candidates.find((url) => url.protocol === "file:" && fs.existsSync(url))
  } catch {
    return undefined // not a file (a single executable): no worker
  }
}

/**
 * Starts the worker when GROVE_PLACE_THREAD=1 asks for it (the tests, and measuring) and it can run, else undefined.
 * `onChunk` takes what the worker hands back (a promise while it writes); a throw fails the download.
 */
export const startPlaceThread = (
  setup: PlaceSetup,
  onChunk: (batch: number, hash: string | undefined, data: Uint8Array, zstd: boolean) => Promise<void> | undefined
): PlaceThread | undefined => {
  if (process.env["GROVE_PLACE_THREAD"] !== "1") return undefined
  const file = workerFile()
  if (file === undefined) return undefined
  const { Worker: WorkerThread } = process.getBuiltinModule("node:worker_threads") as typeof import("node:worker_threads")
  const shared = new SharedArrayBuffer(SLOT_BYTES * SLOTS)
  const files = [...setup.to.keys()]
  const entries = [...setup.to.values()]
  const workerSetup: WorkerSetup = {
    root: setup.root,
    files,
    hashes: entries.map((entry) => entry.hash),
    modes: entries.map((entry) => entry.mode),
    chunks: [...setup.sizes.keys()],
    sizes: [...setup.sizes.values()],
    single: setup.single,
    shared,
    slotBytes: SLOT_BYTES
  }
  const worker: Worker = new WorkerThread(file, { workerData: workerSetup, stdout: false, stderr: false })
  let failure: Error | undefined
  const free = Array.from({ length: SLOTS }, (_, slot) => slot)
  /** Answers waiting for a slot. */
  const waiting: Array<() => void> = []
  const ends = new Map<number, Array<{ resolve: (placed: ReadonlyArray<string>) => void; reject: (error: Error) => void }>>()
  /** The main thread's writes of chunks handed back, per batch: an answer's end waits for them. */
  const taking = new Map<number, Array<Promise<void>>>()
  let finished: { resolve: (placed: ReadonlyArray<readonly [string, IndexEntry]>) => void; reject: (error: Error) => void } | undefined
  const wake = () => {
    for (const go of waiting.splice(0)) go()
  }
  const failWith = (error: Error) => {
    failure ??= error
    for (const waits of ends.values()) for (const wait of waits.splice(0)) wait.reject(failure)
    finished?.reject(failure)
    wake()
  }
  worker.on("message", (message: FromWorker) => {
    switch (message.t) {
      case "free":
        free.push(message.slot)
        return wake()
      case "chunk": {
        try {
          const wait = onChunk(message.batch, message.hash, message.data, message.zstd)
          if (wait === undefined) return
          const list = taking.get(message.batch) ?? []
          list.push(wait)
          taking.set(message.batch, list)
          // Seen where the answer's end waits for it; never unhandled meanwhile.
          wait.catch(() => {})
        } catch (error) {
          failWith(error instanceof Error ? error : new Error(String(error)))
        }
        return
      }
      case "ended": {
        const wait = ends.get(message.batch)?.shift()
        const writes = taking.get(message.batch)?.splice(0) ?? []
        if (wait !== undefined) Promise.all(writes).then(() => wait.resolve(message.placed), wait.reject)
        return
      }
      case "failed":
        return failWith(new Error(message.message))
      case "finished": {
        // The hash and mode are the snapshot's (as the worker's placer took them).
        const placed = message.files.map((file, i): readonly [string, IndexEntry] => {
          const { hash, mode } = setup.to.get(file)!
          const at = i * STAT_VALUES
          const [size, mtimeMs, ino, ctimeMs] = message.stats.subarray(at, at + STAT_VALUES) as unknown as [number, number, number, number]
          return [file, { hash, mode, size, mtimeMs, ino, ctimeMs }]
        })
        return finished?.resolve(placed)
      }
    }
  })
  worker.on("error", (error) => failWith(error))
  worker.on("exit", () => failWith(new Error("the file-writing thread ended")))
  const send = (message: ToWorker) => worker.postMessage(message)
  /** Per batch: the slot being filled and how far. */
  const filling = new Map<number, { slot: number; length: number }>()
  const flush = (batch: number) => {
    const fill = filling.get(batch)
    if (fill === undefined) return
    filling.delete(batch)
    send({ t: "part", batch, slot: fill.slot, length: fill.length })
  }
  /** Copies `part` from `at` into slots while there are any; where it got to. */
  const copyIn = (batch: number, part: Uint8Array, at: number): number => {
    while (at < part.length) {
      let fill = filling.get(batch)
      if (fill === undefined) {
        const slot = free.pop()
        if (slot === undefined) return at
        filling.set(batch, fill = { slot, length: 0 })
      }
      const take = Math.min(part.length - at, SLOT_BYTES - fill.length)
      new Uint8Array(shared, fill.slot * SLOT_BYTES + fill.length, take).set(part.subarray(at, at + take))
      fill.length += take
      at += take
      if (fill.length === SLOT_BYTES) flush(batch)
    }
    return at
  }
  return {
    begin: (batch) => {
      // A broken answer's bytes not handed over yet go with it (the worker drops a frame cut short).
      flush(batch)
      send({ t: "begin", batch })
    },
    part: (batch, part) => {
      if (failure !== undefined) throw failure
      const reached = copyIn(batch, part, 0)
      if (reached === part.length) return undefined
      return (async () => {
        for (let at = reached; at < part.length;) {
          await new Promise<void>((resolve) => waiting.push(resolve))
          if (failure !== undefined) throw failure
          at = copyIn(batch, part, at)
        }
      })()
    },
    end: (batch, complete) =>
      new Promise((resolve, reject) => {
        if (failure !== undefined) return reject(failure)
        const waits = ends.get(batch) ?? []
        waits.push({ resolve, reject })
        ends.set(batch, waits)
        flush(batch)
        send({ t: "end", batch, complete })
      }),
    finish: () =>
      new Promise((resolve, reject) => {
        if (failure !== undefined) return reject(failure)
        finished = { resolve, reject }
        send({ t: "finish" })
      }),
    stop: async () => {
      failure ??= new Error("stopped")
      await worker.terminate()
    }
  }
}
