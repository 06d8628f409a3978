import { describe, expect, it } from "@effect/vitest"
import { checkAuthor, checkBranchName, checkCommit, encodeCommit, hashCommit } from "./Commit.ts"
import type { CommitWireFields } from "./Commit.ts"

const EMPTY = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
const HELLO = "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24"
const KNOWN = "93dd864faf6f23324fa2010c7f6d51b5aa456686586a2b65c132575661866b0a"
const JUNE_24 = BigInt(Date.UTC(2026, 5, 24)) * 1_000_000n

const known: CommitWireFields = {
  hash: KNOWN,
  branch_name: "main",
  parent_hash: null,
  manifest_hash: EMPTY,
  author: "tester",
  timestamp: "2026-06-24T00:00:00Z"
}

describe("Commit", () => {
  it("hashes the protocol's known commit", () => {
    const fields = { branch_name: "main", parent_hash: null, manifest_hash: EMPTY, author: "tester", timestamp: JUNE_24 }
    expect(encodeCommit(fields)).toBe(`main\n\n\n${EMPTY}\ntester\n\n2026-06-24T00:00:00+00:00`)
    expect(hashCommit(fields)).toBe(KNOWN)
    expect(hashCommit({ ...fields, merge_parent_hash: null, message: null })).toBe(KNOWN)
    expect(hashCommit({ ...fields, message: "" })).toBe(KNOWN)
  })

  it("covers every field", () => {
    const fields = { branch_name: "main", parent_hash: null, manifest_hash: EMPTY, author: "tester", timestamp: JUNE_24 }
    const variants = [
      { ...fields, branch_name: "dev" },
      { ...fields, parent_hash: HELLO },
      { ...fields, merge_parent_hash: HELLO },
      { ...fields, manifest_hash: HELLO },
      { ...fields, author: "other" },
      { ...fields, message: "m" },
      { ...fields, timestamp: JUNE_24 + 1_000_000n }
    ]
    expect(new Set([KNOWN, ...variants.map(hashCommit)]).size).toBe(variants.length + 1)
  })

  it("verifies a wire commit, whatever offset its timestamp uses", () => {
    expect(checkCommit(known)).toEqual({
      ok: true,
      fields: { branch_name: "main", parent_hash: null, merge_parent_hash: null, manifest_hash: EMPTY, author: "tester", message: null, timestamp: JUNE_24 }
    })
    expect(checkCommit({ ...known, timestamp: "2026-06-24T00:00:00+00:00" }).ok).toBe(true)
    expect(checkCommit({ ...known, timestamp: "2026-06-24T02:00:00.000+02:00" }).ok).toBe(true)
    expect(checkCommit({ ...known, merge_parent_hash: null, message: null }).ok).toBe(true)
  })

  it("rejects a wrong hash, bad hashes, bad names and bad timestamps", () => {
    const reject = (c: CommitWireFields) => expect(checkCommit(c).ok, JSON.stringify(c)).toBe(false)
    reject({ ...known, hash: HELLO })
    reject({ ...known, hash: KNOWN.toUpperCase() })
    reject({ ...known, timestamp: "2026-06-24T00:00:00.001Z" })
    reject({ ...known, timestamp: "2026-06-24T00:00:00" })
    reject({ ...known, parent_hash: "" })
    reject({ ...known, parent_hash: HELLO.slice(2) })
    reject({ ...known, merge_parent_hash: "x" })
    reject({ ...known, manifest_hash: `${EMPTY} ` })
    reject({ ...known, branch_name: "" })
    reject({ ...known, branch_name: "ma\nin" })
    reject({ ...known, author: "test\ter" })
    reject({ ...known, message: "\uDC00" })
    expect(checkCommit({ ...known, hash: HELLO })).toEqual({
      ok: false,
      reason: `commit hash mismatch: claimed ${HELLO}, computed ${KNOWN}`
    })
  })

  it("keeps branch names and authors free of the hash's separators", () => {
    for (const good of ["main", "feature/x y", "fix-1", "ü"]) expect(checkBranchName(good).ok, good).toBe(true)
    for (const bad of ["", "a\nb", "a\tb", "a\0b"]) expect(checkBranchName(bad).ok, JSON.stringify(bad)).toBe(false)
    for (const good of ["tester", "Ada Lovelace <ada@example.com>", ""]) expect(checkAuthor(good).ok, good).toBe(true)
    for (const bad of ["a\nb", "a\tb", "a\0b"]) expect(checkAuthor(bad).ok, JSON.stringify(bad)).toBe(false)
  })
})
