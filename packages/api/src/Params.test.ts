import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import * as P from "./Params.ts"

const HASH = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"

/** Values every kind refuses: NUL, other C0 controls, DEL, a C1 control. */
const CONTROL = ["a\u0000b", "\u0000", "a\u0001", "\u007f", "a\u0085b", "a\nb", "a\tb"]

const table: ReadonlyArray<{
  readonly kind: string
  readonly schema: Schema.Codec<string, string>
  readonly good: ReadonlyArray<string>
  readonly bad: ReadonlyArray<string>
}> = [
  {
    kind: "Slug",
    schema: P.Slug,
    // Reserved slugs have a slug's shape: a path naming one is simply not found, not malformed.
    good: ["alice", "a", "acme-corp", "x1", "0", "a".repeat(39), "orgs", "api"],
    bad: ["", "Alice", "-a", "a-", "a--b", "a.b", "a/b", "a b", "a_b", "a".repeat(40), "é", ...CONTROL]
  },
  {
    kind: "RepoName",
    schema: P.RepoName,
    good: ["proj", "my.repo", "a_b-c", "_x", "X1", "a.gitx", "git", "a".repeat(100)],
    bad: ["", ".", "..", "a..b", ".hidden", "a/b", "a\\b", "a b", "x.git", "X.GIT", "a".repeat(101), "é", ...CONTROL]
  },
  {
    kind: "BranchName",
    schema: P.BranchName,
    // Slashes, spaces (even leading: a push may bring one), Unicode and astral characters are fine.
    good: ["main", "feature/x y", " padded ", "é", "ブランチ", "😀", "a".repeat(255), HASH],
    bad: ["", "a".repeat(256), "a\ud800b", ...CONTROL]
  },
  {
    kind: "CommitRef",
    schema: P.CommitRef,
    good: [HASH, "main", "feature/x"],
    bad: ["", "a".repeat(256), ...CONTROL]
  },
  {
    kind: "Hash",
    schema: P.Hash,
    good: [HASH, "0".repeat(64)],
    bad: ["", "abc", HASH.toUpperCase(), `${HASH}0`, HASH.slice(1), `g${HASH.slice(1)}`, ...CONTROL]
  },
  {
    kind: "KeyId",
    schema: P.KeyId,
    good: ["0b5bb0e4-6f0c-4a36-9e0a-2b7bbf3c1f5e", "not-a-key", "a".repeat(64)],
    bad: ["", "a".repeat(65), "a b", "a/b", "a.b", ...CONTROL]
  },
  {
    kind: "OperationId",
    schema: P.OperationId,
    good: ["0b5bb0e4-6f0c-4a36-9e0a-2b7bbf3c1f5e", `idem:0b5bb0e4-6f0c-4a36-9e0a-2b7bbf3c1f5e:${"~".repeat(200)}`, "idem:anonymous:k/1"],
    bad: ["", "a".repeat(257), "a b", "é", ...CONTROL]
  },
  {
    kind: "RepoPath",
    schema: P.RepoPath,
    good: ["", "src", "src/main.ts", "a b/é/😀", "a".repeat(4096)],
    bad: ["a".repeat(4097), "a\ud800", ...CONTROL]
  }
]

const accepts = (schema: Schema.Codec<string, string>, value: string) => Schema.is(schema)(value)

/** What `/api/openapi.json` says about the kind: its pattern and length bounds. */
const documented = (schema: Schema.Codec<string, string>) => {
  const json = Schema.toJsonSchemaDocument(schema).schema as {
    readonly type?: string
    readonly pattern?: string
    readonly minLength?: number
    readonly maxLength?: number
    readonly description?: string
  }
  return json
}

/** JSON Schema counts code points; the pattern is an ECMA-262 regex with the `u` flag. */
const documentAccepts = (json: ReturnType<typeof documented>, value: string) => {
  const length = [...value].length
  return new RegExp(json.pattern!, "u").test(value) && length >= (json.minLength ?? 0) && length <= json.maxLength!
}

describe("path parameter schemas", () => {
  for (const { kind, schema, good, bad } of table) {
    it(`${kind} accepts what can exist and refuses the rest`, () => {
      for (const value of good) expect(accepts(schema, value), JSON.stringify(value)).toBe(true)
      for (const value of bad) expect(accepts(schema, value), JSON.stringify(value)).toBe(false)
    })

    it(`${kind} is documented with a pattern and length bounds that never refuse an accepted value`, () => {
      const json = documented(schema)
      expect(json.type).toBe("string")
      expect(json.pattern).toBeTypeOf("string")
      expect(json.maxLength).toBeTypeOf("number")
      expect(json.description).toBeTypeOf("string")
      for (const value of good) expect(documentAccepts(json, value), JSON.stringify(value)).toBe(true)
      // Every control character is refused by the document too, not only at run time.
      for (const value of CONTROL) expect(documentAccepts(json, value), JSON.stringify(value)).toBe(false)
      expect(documentAccepts(json, "a".repeat(json.maxLength! + 1))).toBe(false)
    })
  }

  it("the exact kinds are documented exactly: the pattern refuses what the check refuses", () => {
    for (const { kind, schema, bad } of table) {
      if (!["Slug", "RepoName", "Hash", "KeyId", "OperationId"].includes(kind)) continue
      const json = documented(schema)
      for (const value of bad) expect(documentAccepts(json, value), `${kind} ${JSON.stringify(value)}`).toBe(false)
    }
  })

  it("a failure names the rule and never echoes the value", () => {
    const decode = Schema.decodeUnknownResult(Schema.Struct(P.OwnerRepoBranch))
    const result = decode({ owner: "alice", name: "proj", branch: "x\u0000secret" })
    expect(result._tag).toBe("Failure")
    const message = result._tag === "Failure" ? result.failure.message : ""
    expect(message).toContain("branch name must not contain newline, tab or NUL")
    expect(message).toContain("branch")
    expect(message).not.toContain("secret")
  })
})
