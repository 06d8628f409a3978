/**
 * The streaming check of one object's bytes: the whole object against its name (BLAKE3 for content,
 * SHA-256 for releases and CI objects), and each chunk inside a pack against its own name, whatever
 * the boundaries of the pieces the store delivers.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { algorithmOf, makeVerifier, type Slice } from "./FsckVerify.ts"

const bytes = (text: string) => new TextEncoder().encode(text)

/** A pack of `parts`, and its slices. */
const pack = (parts: ReadonlyArray<string>) => {
  const body = bytes(parts.join(""))
  const slices: Array<Slice> = []
  let offset = 0
  for (const part of parts) {
    slices.push({ hash: Blake3.hash(bytes(part)), offset, size: bytes(part).length })
    offset += bytes(part).length
  }
  return { body, slices }
}

/** Feeds `body` in pieces of `size` bytes. */
const verify = (body: Uint8Array, slices: ReadonlyArray<Slice>, size: number) =>
  Effect.gen(function*() {
    const verifier = makeVerifier("blake3", yield* Blake3.makeHasher, slices)
    for (let at = 0; at < body.length; at += size) verifier.feed(body.subarray(at, at + size))
    return verifier.finish()
  })

describe("FsckVerify", () => {
  it("names the hash algorithm by namespace", () => {
    expect(algorithmOf("releases")).toBe("sha256")
    expect(algorithmOf("ci-0b5c9e52-1111-4222-8333-444455556666")).toBe("sha256")
    expect(algorithmOf("0b5c9e52-1111-4222-8333-444455556666")).toBe("blake3")
  })

  it.effect("a sound pack: its hash and every slice's, across any piece boundaries", () =>
    Effect.gen(function*() {
      const { body, slices } = pack(["alpha\n", "", "beta beta\n", "gamma gamma gamma\n"])
      for (const size of [1, 3, 7, body.length]) {
        const verdict = yield* verify(body, slices, size)
        expect(verdict).toEqual({ hash: Blake3.hash(body), size: body.length, faults: [] })
      }
    }))

  it.effect("an empty chunk listed after the chunk that shares its offset is sound (the database's order is any)", () =>
    Effect.gen(function*() {
      const { body, slices } = pack(["alpha\n", "", "beta beta\n", "", "gamma gamma gamma\n", ""])
      const listed = [slices[2]!, slices[1]!, slices[4]!, slices[3]!, slices[0]!, slices[5]!]
      for (const size of [1, 6, body.length]) {
        const verdict = yield* verify(body, listed, size)
        expect(verdict).toEqual({ hash: Blake3.hash(body), size: body.length, faults: [] })
      }
    }))

  it.effect("a changed byte fails the pack and exactly the slice it lies in", () =>
    Effect.gen(function*() {
      const { body, slices } = pack(["alpha\n", "beta beta\n", "gamma gamma gamma\n"])
      const damaged = Uint8Array.from(body)
      damaged[8] = 0x58 // inside "beta beta\n"
      for (const size of [2, 5, damaged.length]) {
        const verdict = yield* verify(damaged, slices, size)
        expect(verdict.hash).not.toBe(Blake3.hash(body))
        expect(verdict.faults).toEqual([
          { slice: slices[1], problem: { _tag: "Mismatch", computed: Blake3.hash(damaged.subarray(6, 16)) } }
        ])
      }
    }))

  it.effect("a truncated object: the slices past its end are out of range, the others sound", () =>
    Effect.gen(function*() {
      const { body, slices } = pack(["alpha\n", "beta beta\n", "gamma gamma gamma\n"])
      const verdict = yield* verify(body.subarray(0, 10), slices, 4)
      expect(verdict.size).toBe(10)
      expect(verdict.faults.map((f) => [f.slice.hash, f.problem._tag])).toEqual([
        [slices[1]!.hash, "OutOfRange"],
        [slices[2]!.hash, "OutOfRange"]
      ])
    }))

  it("SHA-256 for a release binary", () => {
    const body = bytes("a release binary")
    const verifier = makeVerifier("sha256", undefined, [])
    verifier.feed(body.subarray(0, 5))
    verifier.feed(body.subarray(5))
    expect(verifier.finish()).toEqual({ hash: createHash("sha256").update(body).digest("hex"), size: body.length, faults: [] })
  })
})
