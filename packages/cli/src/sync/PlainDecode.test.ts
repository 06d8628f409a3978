import { ApiSync } from "@grove/api"
import { Exit, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { plainDecoder, REFUSED } from "./PlainDecode.ts"

const hash = (n: number) => n.toString(16).padStart(64, "0")

/** A pull answer as the server writes it, with every optional shape: null, absent and present keys. */
const answer = () => ({
  head: hash(1),
  branch: { name: "main", description: null, parent_branch: null, status: "open", created_at: "2026-11-28T06:00:00Z" },
  branches: [{ name: "main", description: "d", parent_branch: null, status: "open", created_at: "2026-11-28T06:00:00Z", close_reason: null }],
  commits: [{
    hash: hash(1),
    branch_name: "main",
    parent_hash: null,
    manifest_hash: hash(2),
    author: "a",
    message: "m",
    timestamp: "2026-11-28T06:00:00Z",
    files: [
      { path: "a.txt", change_type: "added", old_blob_hash: null, new_blob_hash: hash(3), new_mode: "regular" },
      { path: "b.txt", change_type: "renamed", old_blob_hash: hash(4), new_blob_hash: hash(4), old_path: "c.txt" }
    ]
  }],
  blobs: [
    { hash: hash(3), content: [], size: 5, chunks: [{ hash: hash(3), offset: 0, size: 5 }] },
    { hash: hash(4), content: [1, 2], size: 2, mapping_proof_token: null }
  ],
  trees: [{ hash: hash(2), entries: [{ name: "a.txt", kind: "blob", hash: hash(3), mode: "regular" }] }]
})

const schemaDecode = Schema.decodeUnknownExit(ApiSync.PullResponse)
const decode = plainDecoder(ApiSync.PullResponse)!

/** Both decoders on one value: the same output, or both refuse it. */
const agree = (value: unknown) => {
  const expected = schemaDecode(value)
  const got = decode(value)
  if (Exit.isSuccess(expected)) expect(got).toStrictEqual(expected.value)
  else expect(got).toBe(REFUSED)
  return got
}

describe("plainDecoder", () => {
  it("compiles the pull answer's schema", () => {
    expect(decode).toBeDefined()
  })

  it("answers what the schema's decoder answers for a pull", () => {
    expect(agree(answer())).not.toBe(REFUSED)
    expect(agree({ ...answer(), head: null, branch: null, commits: [], blobs: [], trees: [], restricted_blobs: [hash(9)] })).not.toBe(REFUSED)
  })

  it("leaves out keys the schema does not know, at every depth, as the schema's decoder does", () => {
    const value = answer() as Record<string, unknown> & ReturnType<typeof answer>
    value["extra"] = 1
    ;(value.commits[0] as Record<string, unknown>)["signature"] = "x"
    ;(value.blobs[0]!.chunks![0] as Record<string, unknown>)["zone"] = 3
    const got = agree(value) as ApiSync.PullResponse
    expect(Object.keys(got)).not.toContain("extra")
    expect(Object.keys(got.commits[0]!)).not.toContain("signature")
    expect(Object.keys(got.blobs[0]!.chunks![0]!)).not.toContain("zone")
  })

  it("refuses what the schema refuses", () => {
    const cases: Array<(v: ReturnType<typeof answer>) => unknown> = [
      (v) => ({ ...v, head: 5 }),
      (v) => ({ ...v, commits: undefined }),
      (v) => ({ ...v, commits: {} }),
      (v) => ({ ...v, branch: [] }),
      (v) => ({ ...v, branches: [null] }),
      (v) => ({ ...v, blobs: [{ ...v.blobs[0]!, size: "5" }] }),
      (v) => ({ ...v, blobs: [{ ...v.blobs[0]!, content: "AAEC" }] }),
      (v) => ({ ...v, blobs: [{ ...v.blobs[0]!, chunks: [{ hash: hash(3), offset: 0 }] }] }),
      (v) => ({ ...v, trees: [{ hash: hash(2), entries: [{ name: "a", kind: "blob", hash: null, mode: "regular" }] }] }),
      (v) => ({ ...v, commits: [{ ...v.commits[0]!, files: [{ path: "a", change_type: "added", old_blob_hash: 1 }] }] }),
      (v) => ({ ...v, restricted_blobs: [1] }),
      () => null,
      () => [],
      () => "{}"
    ]
    for (const make of cases) expect(agree(make(answer()))).toBe(REFUSED)
  })

  it("compiles nothing for a schema with checks or transformations (the caller keeps the schema's decoder)", () => {
    expect(plainDecoder(Schema.Struct({ a: Schema.String.check(Schema.isMinLength(1)) }))).toBeUndefined()
    expect(plainDecoder(Schema.Struct({ a: Schema.NumberFromString }))).toBeUndefined()
    expect(plainDecoder(Schema.Record(Schema.String, Schema.Number))).toBeUndefined()
  })
})
