/**
 * FastCDC v2020 chunker throughput on 64 MiB of pseudo-random bytes, against baselines measured
 * in the same run (a plain loop summing bytes, and memcpy-like Uint8Array.slice).
 *
 *   npx node scripts/bench/fastcdc.ts
 */
import { boundaries, FastCdcChunker } from "../../packages/core/src/chunking/FastCdc.ts"
import { generate } from "../../packages/core/src/chunking/TestInputs.ts"

const MIB = 1024 * 1024
const SIZE = 64 * MIB
const ROUNDS = 5
const data = generate("xorshift32", 1234, SIZE)

// Best of ROUNDS, after one warm-up round; returns MB/s (MiB/s).
const measure = (run: () => number): { mbps: number; check: number } => {
  let check = run()
  let best = Infinity
  for (let i = 0; i < ROUNDS; i++) {
    const start = performance.now()
    check = run()
    best = Math.min(best, performance.now() - start)
  }
  return { mbps: SIZE / MIB / (best / 1000), check }
}

const sumBytes = () => {
  let sum = 0
  for (let i = 0; i < data.length; i++) sum = (sum + data[i]!) | 0
  return sum
}

const copy = () => data.slice().length

const singleBuffer = () => boundaries(data).length

// 64 KiB pieces, as a file or socket stream delivers them; includes the chunk copies.
const streaming = () => {
  const chunker = new FastCdcChunker()
  let count = 0
  for (let at = 0; at < data.length; at += 65_536) count += chunker.push(data.subarray(at, at + 65_536)).length
  return count + chunker.finish().length
}

const rows = [
  ["baseline: sum bytes loop", measure(sumBytes)],
  ["baseline: Uint8Array.slice (copy)", measure(copy)],
  ["FastCDC boundaries (single buffer)", measure(singleBuffer)],
  ["FastCDC streaming (64 KiB pieces)", measure(streaming)]
] as const

const base = rows[0][1].mbps
console.log(`FastCDC v2020 (256 KiB / 1 MiB / 4 MiB) on ${SIZE / MIB} MiB, best of ${ROUNDS}, node ${process.version}`)
for (const [name, { mbps, check }] of rows) {
  console.log(`${name.padEnd(38)} ${mbps.toFixed(0).padStart(7)} MB/s  ${(mbps / base).toFixed(2)}x baseline  (${check})`)
}
