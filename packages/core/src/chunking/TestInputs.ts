/**
 * Deterministic inputs shared by the FastCDC fixture (scripts/fastcdc-vectors, Rust), the tests
 * and the benchmark. Must stay byte-identical to the generators in scripts/fastcdc-vectors/src/main.rs.
 */
export type Generator = "xorshift32" | "xorshift32-acgt" | "zeros" | "mod251"

const ACGT = [65, 67, 71, 84]

/** Marsaglia xorshift32 (13, 17, 5); each state is emitted as 4 little-endian bytes. */
const xorshift32 = (seed: number, size: number, acgt: boolean): Uint8Array => {
  const out = new Uint8Array(size)
  let x = seed | 0
  for (let i = 0; i < size; i += 4) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    const n = Math.min(4, size - i)
    for (let k = 0; k < n; k++) {
      const b = (x >>> (8 * k)) & 0xff
      out[i + k] = acgt ? ACGT[b & 3]! : b
    }
  }
  return out
}

export const generate = (generator: Generator, seed: number, size: number): Uint8Array => {
  switch (generator) {
    case "xorshift32":
      return xorshift32(seed, size, false)
    case "xorshift32-acgt":
      return xorshift32(seed, size, true)
    case "zeros":
      return new Uint8Array(size)
    case "mod251": {
      const out = new Uint8Array(size)
      for (let i = 0; i < size; i++) out[i] = i % 251
      return out
    }
  }
}
