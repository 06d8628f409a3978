/**
 * Path parameters at the edge, against the real server: every route of the API (read from
 * `/api/openapi.json`, so a new route is walked without touching this file) and every raw route
 * (binary chunks, raw files, zip and git export: listed below, they are outside the contract) is
 * called by the authenticated owner of an existing repository with a NUL, a control character
 * (\x01, \x7f) and an overlong value in each path parameter in turn. Each answers 400 JSON
 * `{error, code: "invalid_input"}`, never a 5xx, and nothing reaches the database (no
 * "database unavailable" in the server's log). Close and reopen, which used to skip the check
 * and poison their partition, are also called by hand, followed by writes that must still land.
 * The push and staged push bodies get the same treatment field by field: a NUL or another control
 * character in any string field answers 400 `invalid_request` at decoding (issue 20 item 5).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let alice: string
let keyId: string

const HASH = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
const OPERATION = "0b5bb0e4-6f0c-4a36-9e0a-2b7bbf3c1f5e"

beforeAll(async () => {
  server = await startServer()
  alice = await server.createUser("alice")
  const a = api(server.url, alice)
  expect((await a.post("/repos", { name: "proj" })).status).toBe(201)
  const key = await a.post("/api-keys", { name: "spare" })
  expect(key.status).toBe(201)
  keyId = key.body.id
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

interface PathParameter {
  readonly name: string
  readonly in: string
  readonly schema: { readonly type?: string; readonly pattern?: string; readonly maxLength?: number; readonly minLength?: number }
}

interface Route {
  readonly method: string
  /** With `{param}` placeholders, and `*` for the trailing path of tree and raw reads. */
  readonly path: string
  readonly params: ReadonlyArray<string>
  /** Each parameter's documented schema, for the contract's routes (`id` is a key id on one route, an operation id on another). */
  readonly schemas?: Readonly<Record<string, PathParameter["schema"]>>
  /** Appended to the path (the git routes' query). */
  readonly query?: string
}

/** A value of each parameter that is valid (and exists), so only the parameter under test is wrong. */
const validValue = (route: Route, param: string): string => {
  switch (param) {
    case "owner":
    case "slug":
      return "alice"
    case "name":
      return "proj"
    case "branch":
    case "commit":
      return "main"
    case "hash":
      return HASH
    case "id":
      return route.path.includes("/api-keys/")
        ? keyId
        : route.path.includes("/ci/runs/")
        ? "1"
        : route.path.includes("/webhooks/")
        ? "00000000-0000-4000-8000-000000000000"
        : OPERATION
    case "secret":
      return "API_TOKEN"
    case "delivery":
      return "00000000-0000-4000-8000-000000000001"
    case "*":
      return "src"
    case "username":
      return "alice"
    case "group":
      return "ops"
    case "key_id":
      return keyId
    case "stage_id":
    case "token":
      return "0123456789abcdef0123"
    default:
      throw new Error(`no valid value for the path parameter '${param}' of ${route.method} ${route.path}: add one here`)
  }
}

const fill = (route: Route, values: Readonly<Record<string, string>>) =>
  route.path.replace(/\{([^}]+)\}|\*$/g, (match, name: string | undefined) => encodeURIComponent(values[name ?? match]!)) + (route.query ?? "")

const openapi = async () => (await api(server.url).get("/openapi.json")).body as {
  readonly paths: Record<string, Record<string, { readonly parameters?: ReadonlyArray<PathParameter> }>>
}

/** Every operation of the contract with path parameters, and each parameter's documented schema by name (for the raw routes). */
const contractRoutes = async () => {
  const routes: Array<Route> = []
  const schemas = new Map<string, PathParameter["schema"]>()
  for (const [path, operations] of Object.entries((await openapi()).paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const params = (operation.parameters ?? []).filter((p) => p.in === "path")
      if (params.length === 0) continue
      routes.push({
        method: method.toUpperCase(),
        path,
        params: params.map((p) => p.name),
        schemas: Object.fromEntries(params.map((p) => [p.name, p.schema]))
      })
      for (const p of params) schemas.set(p.name, p.schema)
    }
  }
  return { routes, schemas }
}

/** The routes outside the contract (their bodies are streams), under `{site_url}`. */
const RAW_ROUTES: ReadonlyArray<Route> = [
  { method: "PUT", path: "/api/{owner}/{name}/chunks/{hash}", params: ["owner", "name", "hash"] },
  { method: "POST", path: "/api/{owner}/{name}/chunks/batch", params: ["owner", "name"] },
  { method: "POST", path: "/api/{owner}/{name}/chunks/fetch", params: ["owner", "name"] },
  { method: "GET", path: "/api/{owner}/{name}/chunks/fetch/{hash}", params: ["owner", "name", "hash"], query: "?t=1.00" },
  { method: "GET", path: "/api/{owner}/{name}/raw/{commit}/*", params: ["owner", "name", "commit", "*"] },
  { method: "GET", path: "/{owner}/{name}/download", params: ["owner", "name"] },
  { method: "GET", path: "/{owner}/{name}.git/info/refs", params: ["owner", "name"], query: "?service=git-upload-pack" },
  { method: "POST", path: "/{owner}/{name}.git/git-upload-pack", params: ["owner", "name"] }
]

const call = async (method: string, path: string, token: string | undefined) => {
  const response = await fetch(`${server.url}${path}`, {
    method,
    redirect: "manual",
    headers: {
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(method === "GET" || method === "DELETE" ? {} : { "content-type": "application/json" })
    },
    ...(method === "GET" || method === "DELETE" ? {} : { body: "{}" })
  })
  const text = await response.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // not JSON: kept as text, and the assertion below says so
  }
  return { status: response.status, type: response.headers.get("content-type") ?? "", body }
}

/** NUL, a C0 control, DEL, and one character past the longest value the parameter's schema allows. */
const badValues = (schema: PathParameter["schema"]) => [
  { label: "NUL", value: "x\u0000y" },
  { label: "\\x01", value: "x\u0001y" },
  { label: "\\x7f", value: "x\u007fy" },
  // "a" is valid in every kind (slug, repository and branch name, hex hash, ids, paths): only the length is wrong.
  { label: "overlong", value: "a".repeat(schema.maxLength! + 1) }
]

/** Calls `route` with each bad value in each parameter; returns what did not answer 400 invalid_input. */
const walk = async (routes: ReadonlyArray<Route>, schemas: ReadonlyMap<string, PathParameter["schema"]>, token: string | undefined) => {
  const wrong: Array<string> = []
  let calls = 0
  for (const route of routes) {
    for (const param of route.params) {
      for (const { label, value } of badValues(route.schemas?.[param] ?? schemas.get(param)!)) {
        const values = Object.fromEntries(route.params.map((p) => [p, p === param ? value : validValue(route, p)]))
        const reply = await call(route.method, fill(route, values), token)
        calls++
        const body = reply.body as { error?: string; code?: string }
        const ok = reply.status === 400 && reply.type.includes("application/json") && isErrorBody(body) &&
          body.code === "invalid_input" && body.error!.includes(`'${param}'`)
        if (!ok) wrong.push(`${route.method} ${route.path} ${param}=${label}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 200)}`)
      }
    }
  }
  return { wrong, calls }
}

describe("path parameters at the edge", () => {
  it("documents a pattern and a maximum length for every path parameter in /api/openapi.json", async () => {
    const { routes, schemas } = await contractRoutes()
    // Guards the derivation itself: the contract has these many routes with path parameters today.
    expect(routes.length).toBeGreaterThanOrEqual(25)
    expect([...schemas.keys()].sort()).toEqual(["*", "branch", "commit", "delivery", "group", "hash", "id", "key_id", "name", "owner", "secret", "slug", "stage_id", "token", "username"])
    for (const [name, schema] of routes.flatMap((r) => Object.entries(r.schemas!))) {
      expect(schema.type, name).toBe("string")
      expect(schema.pattern, name).toBeTypeOf("string")
      expect(schema.maxLength, name).toBeTypeOf("number")
      expect(new RegExp(schema.pattern!, "u").test("x\u0000y"), name).toBe(false)
    }
  })

  it("answers 400 invalid_input to a NUL, a control character or an overlong value in any parameter of any API route", async () => {
    const { routes, schemas } = await contractRoutes()
    const { wrong, calls } = await walk(routes, schemas, alice)
    expect(wrong).toEqual([])
    expect(calls).toBeGreaterThan(200)
  }, 120_000)

  it("answers the same on the raw routes outside the contract (chunks, raw files, zip, git)", async () => {
    const { schemas } = await contractRoutes()
    const { wrong } = await walk(RAW_ROUTES, schemas, alice)
    expect(wrong).toEqual([])
  }, 60_000)

  it("answers 400 invalid_input to a segment longer than any parameter can be, before routing", async () => {
    for (const path of [`/api/alice/${"a".repeat(5000)}`, `/api/alice/proj/branches/${"b".repeat(2000)}/close`, `/alice/${"c".repeat(1100)}/download`]) {
      const reply = await call(path.endsWith("close") ? "POST" : "GET", path, alice)
      expect(reply.status, path.slice(0, 60)).toBe(400)
      expect(reply.body).toMatchObject({ code: "invalid_input" })
      expect(isErrorBody(reply.body)).toBe(true)
    }
  })

  it("checks the path before the token: no lookup for a malformed path, anonymous or with an unknown token", async () => {
    const path = "/api/alice/proj/branches/x%00y"
    for (const token of [undefined, "grove_unknownunknownunknownunknownunknown12345"]) {
      const reply = await call("GET", path, token)
      expect(reply.status).toBe(400)
      expect(reply.body).toMatchObject({ code: "invalid_input" })
    }
  })

  it("refuses a NUL or control character in close and reopen, and the repository's writes keep landing", async () => {
    const a = api(server.url, alice)
    for (const action of ["close", "reopen"]) {
      for (const branch of ["x%00", "x%01", "%7F", `${"a".repeat(256)}`]) {
        const reply = await a.post(`/alice/proj/branches/${branch}/${action}`)
        expect(reply.status, `${action} ${branch}`).toBe(400)
        expect(isErrorBody(reply.body)).toBe(true)
        expect(reply.body.code).toBe("invalid_input")
      }
    }
    // Names that can exist still work: slashes, Unicode, the longest allowed.
    for (const name of ["feature/x-y", "ブランチ", "b".repeat(255)]) {
      const created = await a.post("/alice/proj/branches", { name })
      expect(created.status, name).toBe(201)
      expect((await a.get(`/alice/proj/branches/${encodeURIComponent(name)}`)).status).toBe(200)
      const closed = await a.post(`/alice/proj/branches/${encodeURIComponent(name)}/close`)
      expect(closed.status, name).toBe(200)
      expect(closed.body.status).toBe("closed")
      const reopened = await a.post(`/alice/proj/branches/${encodeURIComponent(name)}/reopen`)
      expect(reopened.status, name).toBe(200)
      expect(reopened.body.status).toBe("open")
    }
  }, 60_000)

  it("never sent a malformed value to the database", () => {
    expect(server.output()).not.toContain("database unavailable")
    expect(server.output()).not.toContain("SqlError")
  })
})

/** Sets the value at a dotted path (`commits.0.files.0.old_path`) of a JSON body. */
const setAt = (body: unknown, path: string, value: unknown) => {
  const keys = path.split(".")
  let target = body as Record<string, unknown>
  for (const key of keys.slice(0, -1)) target = target[key] as Record<string, unknown>
  target[keys.at(-1)!] = value
}

/** Every string field of a push body, as a dotted path into `pushBody` of a commit with a rename. */
const PUSH_FIELDS = [
  "expected_head", "expected_branch_head", "branch.name", "branch.description", "branch.parent_branch", "branch.status", "branch.created_at",
  "branch.close_reason", "commits.0.hash", "commits.0.branch_name", "commits.0.parent_hash", "commits.0.manifest_hash", "commits.0.author",
  "commits.0.message", "commits.0.timestamp", "commits.0.files.0.path", "commits.0.files.0.change_type", "commits.0.files.0.old_path",
  "commits.0.files.0.old_blob_hash", "commits.0.files.0.new_blob_hash", "commits.0.files.0.old_mode", "commits.0.files.0.new_mode",
  "blobs.0.hash", "trees.0.hash", "trees.0.entries.0.name", "trees.0.entries.0.kind", "trees.0.entries.0.hash", "trees.0.entries.0.mode"
]

describe("push bodies at the edge", () => {
  const renamed = () => {
    const base = buildCommit({ branch: "fields", files: { "old.txt": "same\n" } })
    const moved = buildCommit({ branch: "fields", parent: base, files: { "new.txt": "same\n" }, message: "Rename" })
    return { base, moved }
  }

  it("answers 400 invalid_request to a NUL or a control character in any string field of a push, and stores nothing", async () => {
    const a = api(server.url, alice)
    const { base, moved } = renamed()
    expect((await a.post("/alice/proj/push", pushBody({ branch: "fields", commits: [base] }))).body).toMatchObject({ success: true })
    const template = () => {
      const body = structuredClone(pushBody({ branch: "fields", commits: [moved], expectedHead: base.commit.hash, closeReason: "done" })) as Record<string, any>
      body.expected_branch_head = base.commit.hash
      expect(body.commits[0].files[0]).toMatchObject({ change_type: "renamed", old_path: "old.txt" })
      return body
    }
    const wrong: Array<string> = []
    for (const field of PUSH_FIELDS) {
      for (const bad of ["x\u0000y", "x\u0001y", "x\u007fy"]) {
        const body = template()
        setAt(body, field, bad)
        const reply = await a.post("/alice/proj/push", body)
        if (reply.status !== 400 || !isErrorBody(reply.body) || reply.body.code !== "invalid_request") {
          wrong.push(`${field}=${JSON.stringify(bad)}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 160)}`)
        }
      }
    }
    // The cases, each a commit whose hash covers the NUL (so only the field's rule can refuse it).
    const nulMessage = buildCommit({ branch: "fields", parent: base, files: { "old.txt": "same\n", "m.txt": "m" }, message: "fix\u0000" })
    const reply = await a.post("/alice/proj/push", pushBody({ branch: "fields", commits: [nulMessage], expectedHead: base.commit.hash }))
    if (reply.status !== 400 || reply.body.code !== "invalid_request") wrong.push(`NUL message, hash matching: ${reply.status} ${JSON.stringify(reply.body)}`)
    expect(wrong).toEqual([])
    expect((await a.get("/alice/proj/branches/fields")).body.head).toBe(base.commit.hash)
    // What may be there still is: newlines, tabs and carriage returns in the message and the description.
    const fine = buildCommit({ branch: "fields", parent: base, files: { "new.txt": "same\n" }, message: "Line one\r\n\tline two\n" })
    const accepted = await a.post("/alice/proj/push", pushBody({ branch: "fields", commits: [fine], expectedHead: base.commit.hash, description: "Two\nlines\tand\r\n" }))
    expect(accepted.body, JSON.stringify(accepted.body)).toMatchObject({ success: true })
    expect(server.output()).not.toContain("SqlError")
    expect(server.output()).not.toContain("write_failed")
  }, 120_000)

  it("answers the same for a staged push's batch and finalizer, and for an abort", async () => {
    const a = api(server.url, alice)
    const c = buildCommit({ branch: "staged-fields", files: { "s.txt": "s\n" }, message: "Staged" })
    const body = () => structuredClone({ ...pushBody({ branch: "staged-fields", commits: [c] }), stage_id: "stage-fields-000001", finalize: false }) as Record<string, any>
    const wrong: Array<string> = []
    for (const field of ["stage_id", "branch.name", "branch.description", "branch.parent_branch", "branch.created_at", "commits.0.message", "commits.0.author", "blobs.0.hash"]) {
      const bad = body()
      setAt(bad, field, "x\u0000y")
      const reply = await a.post("/alice/proj/push/staged-v1", bad)
      if (reply.status !== 400 || reply.body.code !== "invalid_request") wrong.push(`${field}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 160)}`)
    }
    const finalizer = { ...body(), finalize: true, commits: [], blobs: [], trees: [], target_head: "x\u0000y" }
    const final = await a.post("/alice/proj/push/staged-v1", finalizer)
    if (final.status !== 400 || final.body.code !== "invalid_request") wrong.push(`target_head: ${final.status}`)
    const abort = await a.post("/alice/proj/push/staged-v1/stage-fields-000001/abort", { branch_name: "x\u0000y", expected_branch_head: null })
    if (abort.status !== 400 || abort.body.code !== "invalid_request") wrong.push(`abort branch_name: ${abort.status}`)
    expect(wrong).toEqual([])
    expect((await a.post("/alice/proj/push/staged-v1", body())).body).toMatchObject({ success: true, message: "staged" })
    expect(server.output()).not.toContain("SqlError")
  }, 60_000)
})
