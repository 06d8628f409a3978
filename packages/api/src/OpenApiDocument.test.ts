import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { OpenApi } from "effect/http-api"
import { GroveApi } from "./Api.ts"
import * as F from "./Fields.ts"
import * as S from "./Schemas.ts"
import { CreateBranch, Hashes } from "./Sync.ts"

const doc = OpenApi.fromApi(GroveApi) as Record<string, any>
const METHODS = ["get", "post", "put", "patch", "delete"]
const operations = Object.values<Record<string, any>>(doc.paths).flatMap((item) =>
  METHODS.flatMap((method) => item[method] === undefined ? [] : [item[method] as Record<string, any>])
)
const operation = (id: string) => operations.find((op) => op.operationId === id)!

/** The JSON Schema of an operation's body property. */
const bodyProperty = (id: string, name: string) =>
  operation(id).requestBody.content["application/json"].schema.properties[name] as Record<string, any>

describe("the OpenAPI document", () => {
  it("declares the bearer scheme and each operation's security: token required, optional, or none", () => {
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" })
    for (const op of operations) expect(op.security, op.operationId).not.toEqual([])
    expect(operation("system.whoami").security).toEqual([{ bearer: [] }])
    expect(operation("repos.create").security).toEqual([{ bearer: [] }])
    expect(operation("repos.get").security).toEqual([{ bearer: [] }, {}])
    expect(operation("system.version").security).toEqual([{ bearer: [] }, {}])
    expect(operation("cliAuth.exchange").security).toEqual([{}])
  })

  it("declares 413 and 415 on every operation with a body", () => {
    const withBody = operations.filter((op) => op.requestBody !== undefined)
    expect(withBody.length).toBeGreaterThan(10)
    for (const op of withBody) expect(Object.keys(op.responses), op.operationId).toEqual(expect.arrayContaining(["413", "415"]))
  })

  it("carries name, hash and enum rules in the body schemas", () => {
    expect(bodyProperty("repos.create", "name")).toMatchObject({ maxLength: 100, pattern: expect.any(String) })
    expect(bodyProperty("orgs.create", "slug").pattern).toContain("api-keys")
    expect(bodyProperty("apiKeys.create", "name")).toMatchObject({ minLength: 1, maxLength: 100 })
    expect(bodyProperty("apiKeys.create", "scope").enum).toEqual(["full", "read"])
    expect(bodyProperty("sync.blobsCheck", "hashes")).toMatchObject({ maxItems: 10_000, uniqueItems: true, items: { pattern: "^[0-9a-f]{64}$" } })
    const status = operation("branches.list").parameters.find((p: { name: string }) => p.name === "status")
    expect(status.schema.enum).toEqual(["open", "closed", "merged"])
  })

  it("says what the push bodies accept: hashes, names, byte arrays, words (issue 20 item 5)", () => {
    const push = operation("sync.push").requestBody.content["application/json"].schema
    const commit = push.properties.commits.items
    expect(commit.properties.hash.pattern).toBe("^[0-9a-f]{64}$")
    expect(commit.properties.branch_name.pattern).toContain("lock")
    expect(commit.properties.message.anyOf[0].pattern).toContain("\\u0000-\\u0008")
    expect(commit.properties.files.items.properties.change_type.pattern).toBe("^(?:added|modified|deleted|renamed)$")
    expect(push.properties.blobs.items.properties.content).toEqual({ type: "array", items: { type: "integer", minimum: 0, maximum: 255 } })
    expect(push.properties.blobs.items.properties.size).toMatchObject({ type: "integer", minimum: 0 })
    expect(push.properties.branch.anyOf[0].properties.created_at.pattern).toContain("[0-9]{4}")
    // The integrity report's parameters, each with its own rule (depth at least 1).
    const query = (id: string, name: string) => operation(id).parameters.find((p: { name: string; in: string }) => p.in === "query" && p.name === name).schema
    const depth = new RegExp(query("integrity.report", "depth").pattern, "u")
    expect(["", "1", "10", "007"].map((v) => depth.test(v))).toEqual([true, true, true, true])
    expect(["0", "00", "-1", "1.5", "x"].map((v) => depth.test(v))).toEqual([false, false, false, false, false])
    expect(query("integrity.report", "verify").pattern).toBe("^(?:|metadata|existence|bytes)$")
    expect(query("integrity.report", "blob").pattern).toBe("^(?:|[0-9a-f]{64})$")
    const staged = operation("stagedPush.stage").requestBody.content["application/json"].schema
    expect(staged.properties.stage_id).toMatchObject({ minLength: 16, maxLength: 128 })
    expect(staged.properties.expected_branch_head.anyOf[0].pattern).toBe("^[0-9a-f]{64}$")
  })

  it("says additionalProperties: false only where extra properties are refused", () => {
    expect(operation("repos.create").requestBody.content["application/json"].schema.additionalProperties).toBe(false)
    // The sync protocol's bodies follow the Oak client and ignore what they do not know.
    expect(JSON.stringify(operation("sync.push").requestBody)).not.toContain("additionalProperties")
  })

  it("refuses in the schemas what the patterns refuse", () => {
    const refuses = (schema: Schema.Codec<any, any>, value: unknown) => Schema.decodeUnknownExit(schema)(value)._tag === "Failure"
    expect(refuses(F.NewSlug, "api-keys")).toBe(true)
    expect(refuses(F.NewSlug, "acme")).toBe(false)
    expect(refuses(F.FullName, "alice/repo")).toBe(false)
    expect(refuses(F.FullName, "orgs/repo")).toBe(true)
    expect(refuses(F.FullName, "alice/x.git")).toBe(true)
    expect(refuses(F.Text("name", 100), " ")).toBe(true)
    expect(refuses(F.NewBranchName, "HEAD")).toBe(true)
    expect(refuses(F.NewBranchName, "feature/x-y")).toBe(false)
    expect(refuses(F.NewBranchName, "feature/x y")).toBe(true)
    expect(refuses(S.CreateRepository, { name: "ok" })).toBe(false)
    expect(refuses(CreateBranch, { name: " lead" })).toBe(true)
    expect(refuses(Hashes, { hashes: ["a".repeat(64), "a".repeat(64)] })).toBe(true)
    // Each pattern agrees with its check on these.
    const patterns: ReadonlyArray<[Schema.Codec<any, any>, ReadonlyArray<string>]> = [
      [F.NewSlug, ["api-keys", "acme", "a--b", "-a", "a".repeat(40)]],
      [F.FullName, ["alice/repo", "orgs/repo", "alice/.x", "alice/x.GIT", "a/b/c", "Alice/x"]],
      [F.Text("name", 100), [" ", "\u00a0", "ok", "a\u0001", "\ufeff", " \u3000\t ", " a ", "\u2028x", "x\u2029", "\u2028 \u2029"]],
      [F.NewBranchName, [
        "HEAD", "head", "refs/x", " x", "x ", "ok/branch", "a\u0085", "-x", "a/-x", "a..b", "x.lock", "x.lock/y", "a.lockx", "@{u}", "@", "@x",
        "a b", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "a/", "/a", "a//b", "a.", ".a", "a/.b", "a.b"
      ]],
      [F.Message("message", 100), ["", "a\r\n\tb", "a\u0000", "a\u0001", "a\u000b", "a\u001b", "a\u007f"]],
      [F.EntryName, ["a", ".", "..", "...", ".a", "a/b", "a\u0000"]],
      [F.Word("kind", ["tree", "blob"]), ["tree", "blob", "trees", " tree", "Tree"]],
      [F.Timestamp("expires_at"), [
        "2030-01-31T12:00:00Z", "2030-02-30T12:00:00Z", "2030-04-31T00:00:00Z", "2028-02-29T00:00:00+01:00", "2030-02-29T00:00:00Z",
        "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "0000-02-29T00:00:00Z", "2030-01-01T24:00:00Z", "2030-01-01T23:59:59.123456789-23:59",
        "2030-01-01T00:00:00+24:00", "2030-13-01T00:00:00Z", "2030-00-10T00:00:00Z", "2030-01-00T00:00:00Z", "2030-01-01T00:00:60Z"
      ]]
    ]
    for (const [schema, values] of patterns) {
      const json = Schema.toJsonSchemaDocument(schema).schema as { pattern: string }
      const pattern = new RegExp(json.pattern, "u")
      for (const value of values) expect(pattern.test(value), `${json.pattern} on ${JSON.stringify(value)}`).toBe(!refuses(schema, value))
    }
  })
})
