/**
 * FastCDC, 2020 variant ("v2020"), byte-identical to the Rust `fastcdc` crate (3.x,
 * `fastcdc::v2020`): same Gear table, same spread-bit masks, normalization level 1, the same
 * two-bytes-per-step rolling loop. Boundaries must match the crate exactly or chunks will not
 * dedup across clients; fixtures/fastcdc-v2020.json (from scripts/fastcdc-vectors) pins them.
 *
 * The 64-bit Gear hash is kept modulo 2^49 as two small integers (bits 0..23 and 24..48): masks
 * only test bits 12..48, and a bit of a shift-and-add hash depends only on bits at or below it.
 * Small integers keep V8 on its fast integer path (no BigInt, no doubles).
 */
import { createHash } from "node:crypto"
import { Stream } from "effect"

/** Protocol parameters (sync-protocol.md, Chunking). */
export const MIN_SIZE = 256 * 1024
export const AVG_SIZE = 1024 * 1024
export const MAX_SIZE = 4 * 1024 * 1024
/** Files of this size or more are chunked; smaller files travel whole. */
export const CHUNKING_THRESHOLD = 10 * 1024 * 1024

export interface ChunkBoundary {
  readonly offset: number
  readonly length: number
}

export interface Chunk extends ChunkBoundary {
  /** A copy owned by the receiver. */
  readonly data: Uint8Array
}

export interface Options {
  readonly minSize?: number
  readonly avgSize?: number
  readonly maxSize?: number
}

// The crate's Gear table: the first 8 bytes (big-endian) of MD5 over 64 copies of the byte i.
// Deriving it avoids pasting 256 constants; the fixture carries the crate's table as a check.
const GEAR: Array<bigint> = []
for (let i = 0; i < 256; i++) GEAR.push(createHash("md5").update(new Uint8Array(64).fill(i)).digest().readBigUInt64BE(0))

const LOW_BITS = 24
const LOW_MASK = 0xffffff
const HIGH_MASK = 0x1ffffff // bits 24..48
const split = (values: ReadonlyArray<bigint>): { readonly hi: Int32Array; readonly lo: Int32Array } => ({
  hi: Int32Array.from(values, (v) => Number((v >> BigInt(LOW_BITS)) & BigInt(HIGH_MASK))),
  lo: Int32Array.from(values, (v) => Number(v & BigInt(LOW_MASK)))
})
const { hi: GEAR_HI, lo: GEAR_LO } = split(GEAR)
// GEAR_LS = GEAR << 1, as in the crate.
const { hi: GEAR_LS_HI, lo: GEAR_LS_LO } = split(GEAR.map((g) => g << 1n))

/** The crate's Gear table as 16-digit hex strings (for cross-checking against its output). */
export const gearTable = (): Array<string> => GEAR.map((g) => g.toString(16).padStart(16, "0"))

// The crate's MASKS table (index = bits).
const MASKS: ReadonlyArray<bigint> = [
  0n,
  0n,
  0n,
  0n,
  0n,
  0x0000000001804110n,
  0x0000000001803110n,
  0x0000000018035100n,
  0x0000001800035300n,
  0x0000019000353000n,
  0x0000590003530000n,
  0x0000d90003530000n,
  0x0000d90103530000n,
  0x0000d90303530000n,
  0x0000d90313530000n,
  0x0000d90f03530000n,
  0x0000d90303537000n,
  0x0000d90703537000n,
  0x0000d90707537000n,
  0x0000d91707537000n,
  0x0000d91747537000n,
  0x0000d91767537000n,
  0x0000d93767537000n,
  0x0000d93777537000n,
  0x0000d93777577000n,
  0x0000db3777577000n
]

const NORMALIZATION = 1

interface Params {
  readonly min: number
  readonly avg: number
  readonly max: number
  readonly sHi: number
  readonly sLo: number
  readonly lHi: number
  readonly lLo: number
  readonly sLsHi: number
  readonly sLsLo: number
  readonly lLsHi: number
  readonly lLsLo: number
}

const halves = (mask: bigint): readonly [number, number] => {
  // Every mask fits in the 49 bits the hash keeps.
  if (mask >> 49n !== 0n) throw new RangeError("FastCDC mask wider than 49 bits")
  return [Number(mask >> BigInt(LOW_BITS)), Number(mask & BigInt(LOW_MASK))]
}

const makeParams = (options: Options | undefined): Params => {
  const min = options?.minSize ?? MIN_SIZE
  const avg = options?.avgSize ?? AVG_SIZE
  const max = options?.maxSize ?? MAX_SIZE
  // Same bounds the crate asserts; a violation is a programming error, not an input error.
  if (!(min >= 64 && min <= 1_048_576 && avg >= 256 && avg <= 4_194_304 && max >= 1024 && max <= 16_777_216)) {
    throw new RangeError(`FastCDC sizes out of range: ${min}/${avg}/${max}`)
  }
  const bits = Math.round(Math.log2(avg))
  const maskS = MASKS[bits + NORMALIZATION]!
  const maskL = MASKS[bits - NORMALIZATION]!
  const [sHi, sLo] = halves(maskS)
  const [lHi, lLo] = halves(maskL)
  const [sLsHi, sLsLo] = halves(maskS << 1n)
  const [lLsHi, lLsLo] = halves(maskL << 1n)
  return { min, avg, max, sHi, sLo, lHi, lLo, sLsHi, sLsLo, lLsHi, lLsLo }
}

const DEFAULT_PARAMS = makeParams(undefined)
const paramsOf = (options: Options | undefined): Params => options === undefined ? DEFAULT_PARAMS : makeParams(options)

/**
 * Length of the next chunk of src[start, end) (the crate's `cut_gear`), where `end - start` is
 * either everything left of the input or at least `max` bytes of it.
 */
const cut = (src: Uint8Array, start: number, end: number, p: Params): number => {
  let remaining = end - start
  if (remaining <= p.min) return remaining
  let center = p.avg
  if (remaining > p.max) remaining = p.max
  else if (remaining < center) center = remaining
  let hi = 0
  let lo = 0
  let index = p.min >>> 1
  // Two phases: the stricter mask below the average size, the looser one above it.
  for (let phase = 0; phase < 2; phase++) {
    const limit = phase === 0 ? center >>> 1 : remaining >>> 1
    const mHi = phase === 0 ? p.sHi : p.lHi
    const mLo = phase === 0 ? p.sLo : p.lLo
    const mLsHi = phase === 0 ? p.sLsHi : p.lLsHi
    const mLsLo = phase === 0 ? p.sLsLo : p.lLsLo
    for (; index < limit; index++) {
      const a = start + index * 2
      // hash = (hash << 2) + GEAR_LS[src[a]]
      let b = src[a]!
      lo = (lo << 2) + GEAR_LS_LO[b]!
      hi = ((hi << 2) + GEAR_LS_HI[b]! + (lo >> LOW_BITS)) & HIGH_MASK
      lo &= LOW_MASK
      if (((lo & mLsLo) | (hi & mLsHi)) === 0) return index * 2
      // hash = hash + GEAR[src[a + 1]]
      b = src[a + 1]!
      lo += GEAR_LO[b]!
      hi = (hi + GEAR_HI[b]! + (lo >> LOW_BITS)) & HIGH_MASK
      lo &= LOW_MASK
      if (((lo & mLo) | (hi & mHi)) === 0) return index * 2 + 1
    }
  }
  // No cut point (e.g. all zeroes): the largest chunk allowed.
  return remaining
}

/** Boundaries of a whole in-memory input (the crate's `FastCDC` iterator). */
export const boundaries = (data: Uint8Array, options?: Options): Array<ChunkBoundary> => {
  const p = paramsOf(options)
  const out: Array<ChunkBoundary> = []
  let offset = 0
  while (offset < data.length) {
    const length = cut(data, offset, data.length, p)
    out.push({ offset, length })
    offset += length
  }
  return out
}

/**
 * Incremental chunker: feed pieces of any size with `push`, then call `finish` once. Buffers at
 * most one max-size chunk; each returned chunk's `data` is a fresh copy.
 */
export class FastCdcChunker {
  readonly #p: Params
  #buffer: Uint8Array | undefined
  #buffered = 0
  #offset = 0
  #finished = false

  constructor(options?: Options) {
    this.#p = paramsOf(options)
  }

  push(piece: Uint8Array): Array<Chunk> {
    if (this.#finished) throw new Error("FastCdcChunker.push after finish")
    const out: Array<Chunk> = []
    const max = this.#p.max
    const buffer = (this.#buffer ??= new Uint8Array(max))
    let read = 0
    while (read < piece.length) {
      const n = Math.min(piece.length - read, max - this.#buffered)
      buffer.set(piece.subarray(read, read + n), this.#buffered)
      this.#buffered += n
      read += n
      // A full window of `max` bytes decides the next cut exactly as the whole input would.
      if (this.#buffered === max) this.#emit(buffer, out)
    }
    return out
  }

  finish(): Array<Chunk> {
    this.#finished = true
    const out: Array<Chunk> = []
    const buffer = this.#buffer
    if (buffer !== undefined) while (this.#buffered > 0) this.#emit(buffer, out)
    this.#buffer = undefined
    return out
  }

  #emit(buffer: Uint8Array, out: Array<Chunk>): void {
    const length = cut(buffer, 0, this.#buffered, this.#p)
    out.push({ offset: this.#offset, length, data: buffer.slice(0, length) })
    buffer.copyWithin(0, length, this.#buffered)
    this.#buffered -= length
    this.#offset += length
  }
}

/** Chunks of a byte stream, in order; the stream's pieces may have any sizes. */
export const chunkStream = <E, R>(self: Stream.Stream<Uint8Array, E, R>, options?: Options): Stream.Stream<Chunk, E, R> =>
  Stream.suspend(() => {
    const chunker = new FastCdcChunker(options)
    return self.pipe(
      Stream.flatMap((piece) => Stream.fromArray(chunker.push(piece))),
      Stream.concat(Stream.suspend(() => Stream.fromArray(chunker.finish())))
    )
  })
