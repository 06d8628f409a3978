/**
 * `GET /api/capabilities` in the OpenAPI document (C5, LOW: it was a bare object): every flag the
 * server advertises is described, with its JSON type, and any other flag is allowed.
 */
import { describe, expect, it } from "@effect/vitest"
import { GroveApi } from "@grove/api"
import { OpenApi } from "effect/http-api"
import { CAPABILITIES } from "../../packages/server/src/sync/SyncHandlers.ts"

const TYPES: Record<string, string> = { string: "string", boolean: "boolean", number: "integer" }

describe("capabilities contract", () => {
  it("describes every advertised flag as an optional property, pull_answer included, others allowed", () => {
    const spec = OpenApi.fromApi(GroveApi) as unknown as {
      paths: Record<string, { get: { responses: Record<string, { content: Record<string, { schema: Record<string, unknown> }> }> } }>
    }
    const schema = spec.paths["/api/capabilities"]!.get.responses["200"]!.content["application/json"]!.schema
    const properties = schema["properties"] as Record<string, { type?: string; description?: string }>
    for (const [name, value] of Object.entries(CAPABILITIES)) {
      expect(properties[name]?.type, name).toBe(TYPES[typeof value])
    }
    expect(properties["pull_answer"]?.description).toContain("compact_v1")
    expect(schema["required"] ?? []).toEqual([])
    expect(schema["additionalProperties"]).not.toBe(false)
  })
})
