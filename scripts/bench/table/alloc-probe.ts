/**
 * Preloaded into a benchmarked server (`node --import` through NODE_OPTIONS) to count the bytes
 * it allocates on the V8 heap while a load runs: the first SIGUSR2 opens a window, the second
 * closes it and writes `{ bytes, gcs }` to the file named by GROVE_BENCH_ALLOC_OUT. Allocation is
 * the heap growth between collections, summed over the collections in the window (V8's
 * GCProfiler reports the used heap before and after each), plus the growth since the last one.
 */
import * as fs from "node:fs"
import * as v8 from "node:v8"

interface HeapPoint {
  readonly heapStatistics: { readonly usedHeapSize: number }
}
interface GcStatistics {
  readonly statistics: ReadonlyArray<{ readonly beforeGC: HeapPoint; readonly afterGC: HeapPoint }>
}

const out = process.env["GROVE_BENCH_ALLOC_OUT"]
if (out !== undefined) {
  let window: { profiler: v8.GCProfiler; used: number } | undefined
  process.on("SIGUSR2", () => {
    if (window === undefined) {
      const profiler = new v8.GCProfiler()
      profiler.start()
      window = { profiler, used: v8.getHeapStatistics().used_heap_size }
      return
    }
    const stats = window.profiler.stop() as unknown as GcStatistics
    let last = window.used
    let bytes = 0
    for (const gc of stats.statistics) {
      bytes += Math.max(0, gc.beforeGC.heapStatistics.usedHeapSize - last)
      last = gc.afterGC.heapStatistics.usedHeapSize
    }
    bytes += Math.max(0, v8.getHeapStatistics().used_heap_size - last)
    window = undefined
    fs.writeFileSync(out, JSON.stringify({ bytes, gcs: stats.statistics.length }))
  })
}

/** The environment that loads this probe into a spawned Node process, writing to `file`. */
export const allocProbeEnv = (file: string): NodeJS.ProcessEnv => ({
  NODE_OPTIONS: `${process.env["NODE_OPTIONS"] ?? ""} --import=${import.meta.filename}`.trim(),
  GROVE_BENCH_ALLOC_OUT: file
})

/** Opens a counting window in the probed process `pid`; the returned function closes it and answers the bytes. */
export const allocWindow = (pid: number, file: string) => {
  fs.rmSync(file, { force: true })
  process.kill(pid, "SIGUSR2")
  return async (): Promise<number> => {
    process.kill(pid, "SIGUSR2")
    for (let i = 0; i < 600 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 50))
    return (JSON.parse(fs.readFileSync(file, "utf8")) as { bytes: number }).bytes
  }
}
