/**
 * What the generated OpenAPI document cannot say by itself, added as a transform of the whole
 * document (`/api/openapi.json`):
 *
 * - the bearer scheme (`Authorization: Bearer grove_…`) and each operation's `security`: the
 *   operations of an account need a token (anonymous callers get 401); every other operation also
 *   serves anonymous callers (`{}`), who can read public repositories only (a write answers 401,
 *   or 404 where the repository is hidden from them);
 * - the edge's answers that no endpoint declares: 413 (a body past the route's limit) and 415
 *   (a body that is not `application/json`) on every operation that takes a body;
 * - the `X-Next-Cursor` and `Link` headers of a list's page;
 * - the sync protocol's and the staged push's request bodies accept properties they do not declare (the groups decode
 *   them leniently for the Oak client), so their `additionalProperties: false` is removed;
 * - their byte arrays (`content`, Sync.ByteArray: a declaration, which the generator renders as `{}`) are arrays of
 *   integers 0-255.
 */
import { BYTE_ARRAY_JSON_SCHEMA } from "./Sync.ts"

/** The scheme's name in `components.securitySchemes`. */
export const BEARER = "bearer"

/** Operations that answer 401 to every anonymous caller. */
export const TOKEN_REQUIRED: ReadonlySet<string> = new Set([
  "system.whoami",
  "system.operation",
  "apiKeys.list",
  "apiKeys.create",
  "apiKeys.revoke",
  "orgs.list",
  "orgs.create",
  "repos.create",
  "audit.list"
])

/** Operations that use no token at all: the one-time code is the credential. */
export const NO_TOKEN: ReadonlySet<string> = new Set(["cliAuth.exchange"])

const errorBody = {
  type: "object",
  properties: {
    error: { type: "string" },
    code: { type: "string" },
    retryable: { type: "boolean" }
  },
  required: ["error"],
  additionalProperties: false
}

const edgeErrors = {
  "413": {
    description: "The body is larger than this route accepts (code payload_too_large).",
    content: { "application/json": { schema: errorBody } }
  },
  "415": {
    description: "The body is not application/json (code unsupported_media_type).",
    content: { "application/json": { schema: errorBody } }
  }
}

/** Operations whose bodies are decoded leniently (see SyncGroup, StagedPushGroup). */
const LENIENT_BODIES = ["sync.", "stagedPush."]

const allowExtraProperties = (schema: unknown): void => {
  if (Array.isArray(schema)) return schema.forEach(allowExtraProperties)
  if (typeof schema !== "object" || schema === null) return
  const record = schema as Record<string, unknown>
  if (record.additionalProperties === false) delete record.additionalProperties
  Object.values(record).forEach(allowExtraProperties)
}

const isEmptySchema = (value: unknown) => typeof value === "object" && value !== null && Object.keys(value).length === 0

/** Every `content: {}` property (Sync.ByteArray) of a sync or staged push schema, request or response. */
const describeByteArrays = (schema: unknown): void => {
  if (Array.isArray(schema)) return schema.forEach(describeByteArrays)
  if (typeof schema !== "object" || schema === null) return
  const record = schema as Record<string, unknown>
  const properties = record.properties as Record<string, unknown> | undefined
  if (typeof properties === "object" && properties !== null && isEmptySchema(properties.content)) {
    properties.content = structuredClone(BYTE_ARRAY_JSON_SCHEMA)
  }
  Object.values(record).forEach(describeByteArrays)
}

/** A list's next page (see `Fields.Page`), on every 200 of a list. */
const pageHeaders = {
  "x-next-cursor": {
    description: "Present when there are more items: pass it as `cursor` for the next page.",
    required: false,
    schema: { type: "string" }
  },
  link: {
    description: "Present when there are more items: `<next page's URL>; rel=\"next\"`.",
    required: false,
    schema: { type: "string" }
  }
}

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

export const truthfulDocument = (spec: Record<string, any>): Record<string, any> => {
  spec.components ??= {}
  spec.components.securitySchemes = {
    ...spec.components.securitySchemes,
    [BEARER]: {
      type: "http",
      scheme: "bearer",
      description: "A Grove token (`grove_` and an opaque part): a login session, a personal API key or a service-account key."
    }
  }
  for (const item of Object.values<Record<string, any>>(spec.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method]
      if (op === undefined) continue
      const id = String(op.operationId)
      op.security = NO_TOKEN.has(id) ? [{}] : TOKEN_REQUIRED.has(id) ? [{ [BEARER]: [] }] : [{ [BEARER]: [] }, {}]
      const paged = (op.parameters ?? []).some((parameter: { name?: string; in?: string }) => parameter.in === "query" && parameter.name === "cursor")
      if (paged && op.responses?.["200"] !== undefined) op.responses["200"] = { ...op.responses["200"], headers: { ...op.responses["200"].headers, ...pageHeaders } }
      if (op.requestBody !== undefined && LENIENT_BODIES.some((prefix) => id.startsWith(prefix))) allowExtraProperties(op.requestBody)
      if (LENIENT_BODIES.some((prefix) => id.startsWith(prefix))) describeByteArrays([op.requestBody, op.responses])
      if (op.requestBody !== undefined) {
        op.responses = { ...op.responses }
        for (const [status, response] of Object.entries(edgeErrors)) op.responses[status] ??= response
      }
    }
  }
  return spec
}
