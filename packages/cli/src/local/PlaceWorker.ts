/**
 * The worker thread of PlaceThread.ts: takes a clone's chunks/fetch answers part by part (bare frames), names each
 * chunk from its bytes (BLAKE3) and writes the whole small files straight into place (Placing.directPlacer), so the
 * main thread only reads the sockets. What it cannot place itself (a zstd frame, a chunk of a large blob, a file it
 * could not write) goes back to the main thread, which takes it as it takes any chunk (Download.ts). Messages: see
 * `ToWorker` and `FromWorker` in PlaceThread.ts. Loads no Effect: a worker's start-up is on the clone's path.
 */
import { loadWasmBackend, nativeBackend } from "@grove/core/objects/Blake3Backend"
import { bareFrameSplitter } from "@grove/core/objects/Frames"
import { parentPort, workerData } from "node:worker_threads"
import type { IndexEntry } from "./IndexFile.ts"
import type { FromWorker, ToWorker, WorkerSetup } from "./PlaceThread.ts"
import { STAT_VALUES, strayChunk } from "./PlaceThread.ts"
import { directPlacer } from "./Placing.ts"

const setup = workerData as WorkerSetup
const port = parentPort!
const blake3 = nativeBackend ?? await loadWasmBackend()
const placer = directPlacer(setup.root, new Map(setup.files.map((file, i) => [file, { hash: setup.hashes[i]!, mode: setup.modes[i]! }])))
const sizes = new Map(setup.chunks.map((hash, i) => [hash, setup.sizes[i]!]))
const single = new Set(setup.single)
let failed = false
const post = (message: FromWorker, transfer?: ReadonlyArray<ArrayBuffer>) => port.postMessage(message, transfer as Array<ArrayBuffer>)
/** Per batch: the chunks placed here from its answers so far (reported at each answer's end), and the current answer's splitter. */
const batches = new Map<number, { placed: Array<string>; seen: Set<string>; splitter: ReturnType<typeof bareFrameSplitter> }>()

/** A copy of `data` the main thread gets whole (the view's part is this thread's). */
const handBack = (batch: number, hash: string | undefined, data: Uint8Array, zstd: boolean) => {
  const copy = data.slice()
  post({ t: "chunk", batch, hash, data: copy, zstd }, [copy.buffer])
}

const begin = (batch: number) => {
  const state = batches.get(batch) ?? { placed: [], seen: new Set<string>(), splitter: undefined as never }
  state.splitter = bareFrameSplitter((frame) => {
    if (frame.zstd) return handBack(batch, undefined, frame.data, true)
    const hash = blake3.hash(frame.data)
    if (sizes.get(hash) !== frame.data.length || state.seen.has(hash)) throw strayChunk(hash, state.seen.has(hash))
    if (single.has(hash) && placer.place(hash, frame.data)) {
      state.seen.add(hash)
      state.placed.push(hash)
    } else handBack(batch, hash, frame.data, false)
  })
  batches.set(batch, state)
}

/** The files written and their stat values, flat (cheaper to send than the entries). */
const finished = (placed: ReadonlyMap<string, IndexEntry>) => {
  const stats = new Float64Array(placed.size * STAT_VALUES)
  let at = 0
  for (const entry of placed.values()) {
    stats.set([entry.size, entry.mtimeMs, entry.ino, entry.ctimeMs ?? Number.NaN], at)
    at += STAT_VALUES
  }
  post({ t: "finished", files: [...placed.keys()], stats }, [stats.buffer])
}

const fail = (error: unknown) => {
  failed = true
  post({ t: "failed", message: error instanceof Error ? error.message : String(error) })
}

port.on("message", (message: ToWorker) => {
  if (failed) return
  try {
    switch (message.t) {
      case "begin":
        return begin(message.batch)
      case "part": {
        // Frames within the slot are views of it, written before it is given back; one across slots is copied.
        batches.get(message.batch)!.splitter.push(new Uint8Array(setup.shared, message.slot * setup.slotBytes, message.length))
        return post({ t: "free", slot: message.slot })
      }
      case "end": {
        const state = batches.get(message.batch)
        // A broken answer's last frame may be cut: dropped (the chunks not placed are asked again).
        if (message.complete) state?.splitter.end()
        return post({ t: "ended", batch: message.batch, placed: state?.placed.splice(0) ?? [] })
      }
      case "finish":
        return finished(placer.placed)
    }
  } catch (error) {
    fail(error)
  }
})
