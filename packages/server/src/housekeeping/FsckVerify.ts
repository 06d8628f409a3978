/**
 * fsck's check of one stored object's bytes, as they stream by: the whole object must hash to its
 * name, and each chunk stored inside it (a pack's slices) must hash to the chunk's own name. Memory
 * stays bounded: the object is hashed incrementally, and only the slice being read is held (a pack's
 * chunks are at most `INLINE_MAX`, 1 MiB).
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { createHash } from "node:crypto"
import { RELEASE_NAMESPACE } from "../releases/Releases.ts"

/**
 * How a namespace's objects are named: content (chunks and packs, under an organization's id) by
 * BLAKE3 as the sync protocol hashes it; release binaries and CI logs and caches by SHA-256.
 */
export type Algorithm = "blake3" | "sha256"

/** CI logs' and caches' namespace (ci/CiLogStore.ts, ci/CiCache.ts). */
export const ciNamespace = (orgId: string) => `ci-${orgId}`

export const algorithmOf = (namespace: string): Algorithm =>
  namespace === RELEASE_NAMESPACE || namespace.startsWith("ci-") ? "sha256" : "blake3"

/** A chunk stored at `offset` inside the object. */
export interface Slice {
  readonly hash: string
  readonly offset: number
  readonly size: number
}

export interface SliceFault {
  readonly slice: Slice
  /** What the slice's bytes hash to, or why they could not be read. */
  readonly problem: { readonly _tag: "Mismatch"; readonly computed: string } | { readonly _tag: "OutOfRange"; readonly objectSize: number }
}

export interface Verdict {
  /** What the whole object hashes to. */
  readonly hash: string
  readonly size: number
  readonly faults: ReadonlyArray<SliceFault>
}

export interface ObjectVerifier {
  readonly feed: (piece: Uint8Array) => void
  readonly finish: () => Verdict
}

interface Hasher {
  readonly update: (data: Uint8Array) => void
  readonly digest: () => string
}

const sha256 = (): Hasher => {
  const h = createHash("sha256")
  return { update: (data) => void h.update(data), digest: () => h.digest("hex") }
}

/**
 * A verifier for one object of `algorithm` holding `slices` (none for an object that is one chunk,
 * a release or a CI object). `blake3` is an incremental BLAKE3 hasher (`Blake3.makeHasher`).
 */
export const makeVerifier = (
  algorithm: Algorithm,
  blake3: Blake3.Hasher | undefined,
  slices: ReadonlyArray<Slice>
): ObjectVerifier => {
  const whole: Hasher = algorithm === "sha256" || blake3 === undefined ? sha256() : blake3
  // An empty chunk shares its offset with the chunk packed after it: it sorts first, else it would lie behind the
  // read position once that chunk is read and be called out of range.
  const sorted = [...slices].sort((a, b) => a.offset - b.offset || a.size - b.size)
  const faults: Array<SliceFault> = []
  let position = 0
  let next = 0
  // The slice being gathered: its bytes so far, and how many.
  let current: { slice: Slice; bytes: Uint8Array; filled: number } | undefined

  const closeCurrent = () => {
    if (current === undefined) return
    const computed = Blake3.hash(current.bytes)
    if (computed !== current.slice.hash) faults.push({ slice: current.slice, problem: { _tag: "Mismatch", computed } })
    current = undefined
  }

  const feed = (piece: Uint8Array) => {
    whole.update(piece)
    const end = position + piece.length
    let at = position
    while (at < end) {
      if (current === undefined) {
        // Slices that start before the read position overlap an earlier one: their bytes went by already.
        while (next < sorted.length && sorted[next]!.offset < at) {
          faults.push({ slice: sorted[next]!, problem: { _tag: "OutOfRange", objectSize: -1 } })
          next++
        }
        if (next >= sorted.length || sorted[next]!.offset >= end) break
        const slice = sorted[next++]!
        current = { slice, bytes: new Uint8Array(slice.size), filled: 0 }
        at = slice.offset
      }
      const take = Math.min(current.slice.size - current.filled, end - at)
      current.bytes.set(piece.subarray(at - position, at - position + take), current.filled)
      current.filled += take
      at += take
      if (current.filled === current.slice.size) closeCurrent()
    }
    position = end
  }

  const finish = (): Verdict => {
    // A zero-length slice at the very end is complete without bytes.
    if (current === undefined) {
      while (next < sorted.length && sorted[next]!.size === 0 && sorted[next]!.offset <= position) {
        current = { slice: sorted[next++]!, bytes: new Uint8Array(0), filled: 0 }
        closeCurrent()
      }
    }
    const short = current === undefined ? [] : [current.slice]
    current = undefined
    for (const slice of [...short, ...sorted.slice(next)]) {
      faults.push({ slice, problem: { _tag: "OutOfRange", objectSize: position } })
    }
    next = sorted.length
    return { hash: whole.digest(), size: position, faults }
  }

  return { feed, finish }
}
