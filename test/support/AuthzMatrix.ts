/**
 * The authorization matrix: every endpoint of the spec that the server implements, against every
 * kind of caller, with the exact status each must get. The expected status comes from the rules
 * written out below (the spec's scopes and the README's role table), not from the server's own
 * decision function, so a wrong decision in the server fails here.
 *
 * The world: organization `acme` (owner olga, admin adam, member mia; zed is no member), its private
 * repository `app` and public repository `pub`, a second organization `acme2` (same members) to
 * transfer into, and tokens of every kind. Writes get a fresh target per caller (a branch, a
 * repository, a member, a group, an account), so every row is independent of the others.
 *
 * `run(urls)` sends each request to `urls[i % urls.length]`: with two nodes, half of the cases are
 * answered by each (the cluster variant).
 */
import { expect } from "@effect/vitest"
import { buildCommit, pushBody } from "./content.ts"
import { api, type Reply } from "./http.ts"

type Role = "member" | "admin" | "owner"
type Scope = "read" | "write" | "merge" | "admin" | "release"
const ALL: ReadonlyArray<Scope> = ["read", "write", "merge", "admin", "release"]

/** Who calls: their role in acme (and acme2), what their token may do, and whether it still works. */
interface CallerKind {
  readonly name: string
  readonly kind: "anonymous" | "user" | "service"
  readonly role?: Role
  readonly scopes: ReadonlyArray<Scope>
  /** A personal key limited to another repository. */
  readonly otherRepo?: boolean
  /** Revoked, expired or of a disabled account: 401 everywhere. */
  readonly dead?: "revoked" | "expired" | "disabled"
}

export const CALLERS: ReadonlyArray<CallerKind> = [
  { name: "anonymous", kind: "anonymous", scopes: ["read"] },
  { name: "org member", kind: "user", role: "member", scopes: ALL },
  { name: "non-member", kind: "user", scopes: ALL },
  { name: "org admin", kind: "user", role: "admin", scopes: ALL },
  { name: "owner", kind: "user", role: "owner", scopes: ALL },
  { name: "personal full key", kind: "user", role: "owner", scopes: ALL },
  { name: "personal read key", kind: "user", role: "owner", scopes: ["read"] },
  { name: "key of another repository", kind: "user", role: "owner", scopes: ALL, otherRepo: true },
  ...ALL.map((scope): CallerKind => ({ name: `service key: ${scope}`, kind: "service", role: "owner", scopes: [scope] })),
  { name: "disabled account's key", kind: "service", role: "owner", scopes: ALL.slice(0, 4), dead: "disabled" },
  { name: "revoked key", kind: "user", role: "owner", scopes: ALL, dead: "revoked" },
  { name: "expired key", kind: "user", role: "owner", scopes: ALL, dead: "expired" }
]

/** What an endpoint needs. */
type Need =
  | { readonly on: "public" }
  /** `noRepoKey`: a key limited to one repository may not (403). */
  | { readonly on: "account"; readonly action: "read" | "write"; readonly usersOnly?: boolean; readonly openToService?: boolean; readonly noRepoKey?: boolean }
  /**
   * `pub`: the public repository; otherwise the private one. `transfer`: also needs write on the target organization.
   * `hidden`: a caller without the action is answered 404 whatever it lacks (webhooks: a reader may not learn of any).
   */
  | {
    readonly on: "repo"
    readonly action: Scope
    readonly pub?: boolean
    readonly anonymousOnPublic?: 401 | 200
    readonly transfer?: boolean
    readonly alsoRead?: boolean
    readonly hidden?: boolean
  }
  /** `grantsRead`: the request hands out the `read` scope, which a key may only pass on if it holds it. */
  | {
    readonly on: "org"
    readonly action: "read" | "write" | "admin"
    readonly ownerOnly?: boolean
    readonly usersOnly?: boolean
    readonly instanceAdmin?: boolean
    readonly grantsRead?: boolean
  }
  | { readonly on: "repos-list" }

const rank: Record<Role, number> = { member: 1, admin: 2, owner: 3 }
const roleFor: Record<Scope, Role> = { read: "member", write: "member", merge: "admin", admin: "admin", release: "owner" }

/** The rules, from the spec and the README's access table. */
export const expected = (caller: CallerKind, need: Need, ok: number, tokenRequired: boolean): number => {
  const status = rules(caller, need, ok, tokenRequired)
  return need.on === "repo" && need.hidden === true && caller.dead === undefined && (status === 401 || status === 403) ? 404 : status
}

const rules = (caller: CallerKind, need: Need, ok: number, tokenRequired: boolean): number => {
  if (caller.dead !== undefined) return 401
  if (need.on === "public") return ok
  if (caller.kind === "anonymous") {
    // Operations that need a token say so to anonymous callers; elsewhere what they cannot see is hidden (404).
    if (tokenRequired) return 401
    if (need.on === "repos-list") return ok
    if (need.on === "account") return 401
    if (need.on === "repo" && need.pub === true) return need.action === "read" ? ok : (need.anonymousOnPublic ?? 401)
    return 404
  }
  const has = (scope: Scope) => caller.scopes.includes(scope)
  const missing = 403
  if (need.on === "repos-list") return has("read") ? ok : missing
  if (need.on === "account") {
    if (caller.kind === "service" && need.openToService === true) return ok
    if (caller.otherRepo === true && (need.action === "write" || need.noRepoKey === true)) return 403
    if (!has(need.action)) return missing
    if (need.usersOnly === true && caller.kind !== "user") return 403
    return ok
  }
  // A key limited to another repository sees neither these repositories nor any organization.
  if (caller.otherRepo === true) return 404
  if (need.on === "org") {
    if (caller.role === undefined) return 404
    const scope: Scope = need.action === "admin" ? "admin" : need.action
    if (!has(scope)) return missing
    if (need.usersOnly === true && caller.kind !== "user") return 403
    const role: Role = need.ownerOnly === true ? "owner" : need.action === "admin" ? "admin" : "member"
    if (rank[caller.role] < rank[role]) return 403
    if (need.instanceAdmin === true) return 403
    if (need.grantsRead === true && caller.kind === "service" && !has("read")) return 403
    return ok
  }
  // Repositories: hidden (404) before anything else; then the scope (403 naming it); then the role.
  if (caller.role === undefined && need.pub !== true) return 404
  if (!has(need.action)) return missing
  if (need.action === "read") return ok
  if (caller.role === undefined) return 403
  if (rank[caller.role] < rank[roleFor[need.action]]) return 403
  if (need.alsoRead === true && !has("read")) return missing
  // A service account acts in its own organization only: the target organization is hidden from it.
  if (need.transfer === true && caller.kind === "service") return 404
  return ok
}

interface World {
  readonly tokens: ReadonlyMap<string, string | undefined>
  /** Per caller index: names of fresh targets made for it. */
  readonly fresh: (i: number) => string
  /** A branch with one commit on `app`, per caller: its name and the commit. */
  readonly branches: ReadonlyArray<{ readonly branch: string; readonly revertable: string }>
  readonly appHead: string
}

interface Row {
  readonly endpoint: string
  readonly need: Need
  readonly ok: number
  /** Anonymous callers are told to sign in (401), as the OpenAPI document says of the operation. */
  readonly tokenRequired?: boolean
  readonly call: (client: ReturnType<typeof api>, i: number, world: World) => Promise<Reply>
}

const json = { "content-type": "application/json" }

export const ROWS: ReadonlyArray<Row> = [
  // Account and keys
  { endpoint: "GET /version", need: { on: "public" }, ok: 200, call: (c) => c.get("/version") },
  { endpoint: "GET /whoami", need: { on: "account", action: "read", openToService: true }, ok: 200, call: (c) => c.get("/whoami") },
  { endpoint: "GET /api-keys", need: { on: "account", action: "read", usersOnly: true }, ok: 200, call: (c) => c.get("/api-keys") },
  {
    endpoint: "POST /api-keys",
    need: { on: "account", action: "write", usersOnly: true },
    ok: 201,
    call: (c) => c.post("/api-keys", { name: "matrix" })
  },
  {
    endpoint: "DELETE /api-keys/{id}",
    need: { on: "account", action: "write", usersOnly: true },
    ok: 404,
    call: (c) => c.delete("/api-keys/00000000-0000-4000-8000-000000000000")
  },
  // Repositories
  { endpoint: "GET /repos", need: { on: "repos-list" }, ok: 200, call: (c) => c.get("/repos") },
  {
    endpoint: "POST /repos",
    need: { on: "org", action: "write" },
    tokenRequired: true,
    ok: 201,
    call: (c, i, w) => c.post("/repos", { name: `new-${w.fresh(i)}`, organization_slug: "acme" })
  },
  { endpoint: "GET /{owner}/{name}", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app") },
  { endpoint: "GET /{owner}/{name} (public)", need: { on: "repo", action: "read", pub: true }, ok: 200, call: (c) => c.get("/acme/pub") },
  { endpoint: "DELETE /{owner}/{name}", need: { on: "repo", action: "admin" }, ok: 204, call: (c, i, w) => c.delete(`/acme/del-${w.fresh(i)}`) },
  {
    endpoint: "PATCH /{owner}/{name}/visibility",
    need: { on: "repo", action: "admin" },
    ok: 200,
    call: (c) => c.patch("/acme/app/visibility", { is_public: false })
  },
  {
    endpoint: "POST /{owner}/{name}/transfer",
    need: { on: "repo", action: "admin", transfer: true },
    ok: 200,
    call: (c, i, w) => c.post(`/acme/move-${w.fresh(i)}/transfer`, { to_organization: "acme2" })
  },
  { endpoint: "GET /{owner}/{name}/size", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/size") },
  // Branches
  { endpoint: "GET /{owner}/{name}/branches", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/branches") },
  {
    endpoint: "POST /{owner}/{name}/branches",
    need: { on: "repo", action: "write" },
    ok: 201,
    call: (c, i, w) => c.post("/acme/app/branches", { name: `nb-${w.fresh(i)}` })
  },
  {
    endpoint: "GET /{owner}/{name}/branches/{branch}",
    need: { on: "repo", action: "read" },
    ok: 200,
    call: (c, i, w) => c.get(`/acme/app/branches/${w.branches[i]!.branch}`)
  },
  {
    endpoint: "POST …/branches/{branch}/sync",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c, i, w) => c.post(`/acme/app/branches/${w.branches[i]!.branch}/sync`)
  },
  {
    endpoint: "POST /{owner}/{name}/commits/{hash}/revert",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c, i, w) => c.post(`/acme/app/commits/${w.branches[i]!.revertable}/revert`)
  },
  {
    endpoint: "POST …/branches/{branch}/close",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c, i, w) => c.post(`/acme/app/branches/${w.branches[i]!.branch}/close`)
  },
  {
    endpoint: "POST …/branches/{branch}/reopen",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c, i, w) => c.post(`/acme/app/branches/${w.branches[i]!.branch}/reopen`)
  },
  {
    endpoint: "POST …/branches/{branch}/merge",
    need: { on: "repo", action: "merge" },
    ok: 200,
    call: (c, i, w) => c.post(`/acme/app/branches/${w.branches[i]!.branch}/merge`)
  },
  {
    endpoint: "POST …/branches/{branch}/rename",
    need: { on: "repo", action: "write" },
    ok: 503,
    call: (c, i, w) => c.post(`/acme/app/branches/${w.branches[i]!.branch}/rename`, { name: "renamed" })
  },
  // Commits and content
  {
    endpoint: "POST /{owner}/{name}/commits/info",
    need: { on: "repo", action: "read" },
    ok: 200,
    call: (c, _i, w) => c.post("/acme/app/commits/info", { hashes: [w.appHead] })
  },
  { endpoint: "GET /{owner}/{name}/tree/{commit}", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/tree/main") },
  {
    endpoint: "GET /{owner}/{name}/raw/{commit}/{path}",
    need: { on: "repo", action: "read" },
    ok: 200,
    call: (c) => c.get("/acme/app/raw/main/README.md")
  },
  // Path permissions
  {
    endpoint: "GET /{owner}/{name}/path-permissions",
    need: { on: "repo", action: "read" },
    ok: 200,
    call: (c) => c.get("/acme/app/path-permissions")
  },
  {
    endpoint: "POST /{owner}/{name}/path-permissions/propose",
    need: { on: "repo", action: "admin", alsoRead: true },
    ok: 201,
    call: (c) => c.post("/acme/app/path-permissions/propose", { content: "/docs/ *\n", description: "matrix" })
  },
  // CI
  { endpoint: "GET /{owner}/{name}/ci/runs", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/ci/runs") },
  { endpoint: "GET /{owner}/{name}/ci/runs/{id}", need: { on: "repo", action: "read" }, ok: 404, call: (c) => c.get("/acme/app/ci/runs/999999") },
  { endpoint: "GET …/ci/runs/{id}/logs", need: { on: "repo", action: "read" }, ok: 404, call: (c) => c.get("/acme/app/ci/runs/999999/logs") },
  { endpoint: "GET …/ci/capabilities", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/ci/capabilities") },
  {
    endpoint: "POST /{owner}/{name}/ci/runs",
    need: { on: "repo", action: "write" },
    ok: 201,
    call: (c) => c.post("/acme/app/ci/runs", { workflow: "noop" })
  },
  {
    endpoint: "POST /{owner}/{name}/ci/trigger",
    need: { on: "repo", action: "write" },
    // The expected head is never main's: allowed callers get the precondition's 412.
    ok: 412,
    call: (c, i) =>
      c.post("/acme/app/ci/trigger", { protocol: "ordinary_trigger_v1", expected_commit: "0".repeat(64), idempotency_key: `matrix-${i}`, branch: "main" })
  },
  {
    endpoint: "POST /{owner}/{name}/ci/runs/{id}/cancel",
    need: { on: "repo", action: "write" },
    ok: 404,
    call: (c) => c.post("/acme/app/ci/runs/999999/cancel")
  },
  { endpoint: "GET /{owner}/{name}/ci/secrets", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/ci/secrets") },
  {
    endpoint: "PUT /{owner}/{name}/ci/secrets",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c, i) => c.raw("PUT", "/acme/app/ci/secrets", { name: `MATRIX_${i}`, value: "v" })
  },
  {
    endpoint: "DELETE /{owner}/{name}/ci/secrets/{secret}",
    need: { on: "repo", action: "write" },
    ok: 404,
    call: (c, i) => c.delete(`/acme/app/ci/secrets/GONE_${i}`)
  },
  // Webhooks (an unknown id answers 404 to those allowed to ask); only those who may write see them (issue 20 item 5)
  { endpoint: "GET /{owner}/{name}/webhooks", need: { on: "repo", action: "write", hidden: true }, ok: 200, call: (c) => c.get("/acme/app/webhooks") },
  {
    endpoint: "GET /{owner}/{name}/webhooks (public repository)",
    need: { on: "repo", action: "write", pub: true, hidden: true },
    ok: 200,
    call: (c) => c.get("/acme/pub/webhooks")
  },
  {
    endpoint: "POST /{owner}/{name}/webhooks",
    need: { on: "repo", action: "write" },
    ok: 201,
    call: (c) => c.post("/acme/app/webhooks", { url: "https://93.184.216.34/matrix", events: ["merge"] })
  },
  {
    endpoint: "DELETE /{owner}/{name}/webhooks/{id}",
    need: { on: "repo", action: "write" },
    ok: 404,
    call: (c) => c.delete("/acme/app/webhooks/00000000-0000-4000-8000-000000000000")
  },
  {
    endpoint: "GET …/webhooks/{id}/deliveries",
    need: { on: "repo", action: "write", hidden: true },
    ok: 404,
    call: (c) => c.get("/acme/app/webhooks/00000000-0000-4000-8000-000000000000/deliveries")
  },
  {
    endpoint: "POST …/deliveries/{delivery_id}/redeliver",
    need: { on: "repo", action: "write" },
    ok: 404,
    call: (c) => c.post("/acme/app/webhooks/00000000-0000-4000-8000-000000000000/deliveries/00000000-0000-4000-8000-000000000001/redeliver")
  },
  // Sync protocol
  { endpoint: "GET /{owner}/{name}/pull", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/pull") },
  {
    endpoint: "POST /{owner}/{name}/push",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c, i, w) => {
      const commit = buildCommit({ branch: `push-${w.fresh(i)}`, files: { "pushed.txt": `${i}\n` } })
      return c.post("/acme/app/push", pushBody({ branch: `push-${w.fresh(i)}`, commits: [commit] }))
    }
  },
  {
    endpoint: "POST /{owner}/{name}/blobs/info",
    need: { on: "repo", action: "read" },
    ok: 200,
    call: (c) => c.post("/acme/app/blobs/info", { hashes: [] })
  },
  {
    endpoint: "POST /{owner}/{name}/blobs/check",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c) => c.post("/acme/app/blobs/check", { hashes: [] })
  },
  {
    endpoint: "POST /{owner}/{name}/chunks/download",
    need: { on: "repo", action: "read" },
    ok: 200,
    call: (c) => c.post("/acme/app/chunks/download", { hashes: [] })
  },
  {
    endpoint: "POST /{owner}/{name}/chunks/check",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c) => c.post("/acme/app/chunks/check", { hashes: [] })
  },
  // Staged pushes and blob proofs: past authorization, a refused request (400) or an unknown id (404) shows access was granted.
  {
    endpoint: "POST /{owner}/{name}/push/staged-v1",
    need: { on: "repo", action: "write" },
    ok: 400,
    // Schema-valid (a malformed body is refused at decoding, before authorization), refused after: a finalizer without target_head.
    call: (c, i) => c.post("/acme/app/push/staged-v1", {
      stage_id: `matrix-stage-${String(i).padStart(6, "0")}`,
      expected_branch_head: null,
      branch: { name: `staged-${i}`, status: "open", created_at: "2026-01-01T00:00:00+00:00" },
      finalize: true,
      commits: [],
      blobs: []
    })
  },
  // Open stages: one's own for those who may write, everyone's for admins (the body says which; staged-push.test.ts).
  { endpoint: "GET /{owner}/{name}/push/staged-v1", need: { on: "repo", action: "write" }, ok: 200, call: (c) => c.get("/acme/app/push/staged-v1") },
  {
    endpoint: "POST …/push/staged-v1/{stage_id}/abort",
    need: { on: "repo", action: "write" },
    ok: 200,
    call: (c, i) => c.post(`/acme/app/push/staged-v1/matrix-stage-${String(i).padStart(6, "0")}/abort`, { branch_name: "b", expected_branch_head: null })
  },
  {
    endpoint: "POST /{owner}/{name}/blobs/proofs/async-v1",
    need: { on: "repo", action: "write" },
    ok: 400,
    // Schema-valid, refused after authorization: the same blob declared twice.
    call: (c) => {
      const blob = { hash: "4".repeat(64), size: 5, mapping_digest: "5".repeat(64), total_chunks: 1 }
      return c.post("/acme/app/blobs/proofs/async-v1", { blobs: [blob, blob] })
    }
  },
  {
    endpoint: "PUT …/blobs/proofs/{token}/mappings",
    need: { on: "repo", action: "write" },
    ok: 404,
    call: (c) => c.put("/acme/app/blobs/proofs/0123456789abcdef0123456789abcdef/mappings", {
      pages: [{ blob_index: 0, first_chunk_index: 0, chunks: [{ hash: "a".repeat(64), offset: 0, size: 1 }] }]
    })
  },
  {
    endpoint: "POST …/blobs/proofs/{token}/finalize",
    need: { on: "repo", action: "write" },
    ok: 404,
    call: (c) => c.post("/acme/app/blobs/proofs/0123456789abcdef0123456789abcdef/finalize", {})
  },
  {
    endpoint: "GET …/blobs/proofs/{token}",
    need: { on: "repo", action: "write" },
    ok: 404,
    call: (c) => c.get("/acme/app/blobs/proofs/0123456789abcdef0123456789abcdef")
  },
  // Integrity (the clone preflight)
  {
    endpoint: "GET /{owner}/{name}/integrity/capabilities",
    need: { on: "repo", action: "read" },
    ok: 200,
    call: (c) => c.get("/acme/app/integrity/capabilities")
  },
  { endpoint: "GET /{owner}/{name}/integrity", need: { on: "repo", action: "read" }, ok: 200, call: (c) => c.get("/acme/app/integrity") },
  // Organizations
  { endpoint: "GET /orgs", need: { on: "account", action: "read", noRepoKey: true }, ok: 200, call: (c) => c.get("/orgs") },
  {
    endpoint: "POST /orgs",
    need: { on: "account", action: "write", usersOnly: true },
    ok: 201,
    call: (c, i, w) => c.post("/orgs", { slug: `org-${w.fresh(i)}`, name: "Matrix" })
  },
  { endpoint: "GET /orgs/{slug}", need: { on: "org", action: "read" }, ok: 200, call: (c) => c.get("/orgs/acme") },
  { endpoint: "PATCH /orgs/{slug}", need: { on: "org", action: "admin" }, ok: 200, call: (c) => c.patch("/orgs/acme", { name: "Acme" }) },
  {
    endpoint: "DELETE /orgs/{slug}",
    need: { on: "org", action: "admin", ownerOnly: true },
    ok: 409,
    call: (c) => c.delete("/orgs/acme")
  },
  { endpoint: "GET /orgs/{slug}/members", need: { on: "org", action: "read" }, ok: 200, call: (c) => c.get("/orgs/acme/members") },
  {
    endpoint: "POST /orgs/{slug}/members",
    need: { on: "org", action: "admin" },
    ok: 201,
    call: (c, i) => c.post("/orgs/acme/members", { username: `extra${i}` })
  },
  {
    endpoint: "PATCH /orgs/{slug}/members/{username}",
    need: { on: "org", action: "admin" },
    ok: 200,
    call: (c, i) => c.patch(`/orgs/acme/members/role${i}`, { role: "admin" })
  },
  {
    endpoint: "DELETE /orgs/{slug}/members/{username}",
    need: { on: "org", action: "admin" },
    ok: 204,
    call: (c, i) => c.delete(`/orgs/acme/members/gone${i}`)
  },
  { endpoint: "GET /orgs/{slug}/groups", need: { on: "org", action: "read" }, ok: 200, call: (c) => c.get("/orgs/acme/groups") },
  {
    endpoint: "POST /orgs/{slug}/groups",
    need: { on: "org", action: "admin" },
    ok: 201,
    call: (c, i, w) => c.post("/orgs/acme/groups", { slug: `g-${w.fresh(i)}` })
  },
  {
    endpoint: "POST /orgs/{slug}/groups/{group}/members",
    need: { on: "org", action: "admin" },
    ok: 200,
    call: (c, i, w) => c.post(`/orgs/acme/groups/fixed-${w.fresh(i)}/members`, { username: "mia" })
  },
  {
    endpoint: "DELETE /orgs/{slug}/groups/{group}/members/{username}",
    need: { on: "org", action: "admin" },
    ok: 204,
    call: (c, i, w) => c.delete(`/orgs/acme/groups/fixed-${w.fresh(i)}/members/adam`)
  },
  {
    endpoint: "DELETE /orgs/{slug}/groups/{group}",
    need: { on: "org", action: "admin" },
    ok: 204,
    call: (c, i, w) => c.delete(`/orgs/acme/groups/fixed-${w.fresh(i)}`)
  },
  { endpoint: "GET /orgs/{slug}/storage", need: { on: "org", action: "read" }, ok: 200, call: (c) => c.get("/orgs/acme/storage") },
  {
    endpoint: "GET /orgs/{slug}/audit",
    need: { on: "org", action: "admin" },
    ok: 200,
    tokenRequired: true,
    call: (c) => c.get("/orgs/acme/audit")
  },
  {
    endpoint: "PUT /orgs/{slug}/quota",
    need: { on: "org", action: "admin", instanceAdmin: true },
    ok: 200,
    call: (c) => c.raw("PUT", "/orgs/acme/quota", { quota_bytes: 1_000_000_000 }, json)
  },
  // Service accounts
  {
    endpoint: "GET /orgs/{slug}/service-accounts",
    need: { on: "org", action: "read" },
    ok: 200,
    call: (c) => c.get("/orgs/acme/service-accounts")
  },
  {
    endpoint: "POST /orgs/{slug}/service-accounts",
    need: { on: "org", action: "admin" },
    ok: 201,
    call: (c, i, w) => c.post("/orgs/acme/service-accounts", { name: `sa-${w.fresh(i)}` })
  },
  {
    endpoint: "PATCH /orgs/{slug}/service-accounts/{name}",
    need: { on: "org", action: "admin" },
    ok: 200,
    call: (c, i, w) => c.patch(`/orgs/acme/service-accounts/fixed-${w.fresh(i)}`, { disabled: false })
  },
  {
    endpoint: "GET /orgs/{slug}/service-accounts/{name}/keys",
    need: { on: "org", action: "admin" },
    ok: 200,
    call: (c, i, w) => c.get(`/orgs/acme/service-accounts/fixed-${w.fresh(i)}/keys`)
  },
  {
    endpoint: "POST /orgs/{slug}/service-accounts/{name}/keys",
    need: { on: "org", action: "admin", grantsRead: true },
    ok: 201,
    call: (c, i, w) => c.post(`/orgs/acme/service-accounts/fixed-${w.fresh(i)}/keys`, { name: "k", scopes: "read" })
  },
  {
    endpoint: "DELETE /orgs/{slug}/service-accounts/{name}/keys/{key_id}",
    need: { on: "org", action: "admin" },
    ok: 404,
    call: (c, i, w) => c.delete(`/orgs/acme/service-accounts/fixed-${w.fresh(i)}/keys/00000000-0000-4000-8000-000000000000`)
  },
  {
    endpoint: "DELETE /orgs/{slug}/service-accounts/{name}",
    need: { on: "org", action: "admin" },
    ok: 204,
    call: (c, i, w) => c.delete(`/orgs/acme/service-accounts/fixed-${w.fresh(i)}`)
  }
]

/** Spec endpoints that answer 404 to everyone because they are not implemented yet (CI, webhooks, sites, releases). */
export const NOT_IMPLEMENTED = [
  "GET /orgs/{slug}/site",
  "PUT /orgs/{slug}/site",
  "DELETE /orgs/{slug}/site",
  "GET /sites",
  "GET /releases",
  "GET /releases/latest",
  "GET /releases/{version}/{platform}",
  "GET /releases/{version}/{platform}/sha256",
  "GET /releases/{version}/{platform}/minisig"
]

const check = (reply: Reply, what: string, status: number) => expect(reply.status, `${what}: ${JSON.stringify(reply.body)}`).toBe(status)

/**
 * Builds the world through the API as the owner (`olga`, an instance admin is not needed) and
 * returns each caller's token. `createUser(name)` answers a user's initial key.
 */
export const buildWorld = async (url: string, createUser: (name: string) => Promise<string>): Promise<World> => {
  const users = ["olga", "adam", "mia", "zed", ...CALLERS.map((_, i) => `extra${i}`), ...CALLERS.map((_, i) => `role${i}`), ...CALLERS.map((_, i) => `gone${i}`)]
  // Each user is a `grove-server user create` process: a few at a time.
  const keys = new Map<string, string>()
  const queue = [...users]
  await Promise.all(Array.from({ length: 6 }, async () => {
    for (let user = queue.shift(); user !== undefined; user = queue.shift()) keys.set(user, await createUser(user))
  }))
  const as = (user: string) => api(url, keys.get(user))
  const olga = as("olga")
  check(await olga.post("/orgs", { slug: "acme", name: "Acme" }), "org", 201)
  check(await olga.post("/orgs", { slug: "acme2", name: "Acme 2" }), "org", 201)
  for (const org of ["acme", "acme2"]) {
    check(await olga.post(`/orgs/${org}/members`, { username: "adam", role: "admin" }), "admin", 201)
    check(await olga.post(`/orgs/${org}/members`, { username: "mia" }), "member", 201)
  }
  for (let i = 0; i < CALLERS.length; i++) {
    check(await olga.post("/orgs/acme/members", { username: `role${i}` }), "role target", 201)
    check(await olga.post("/orgs/acme/members", { username: `gone${i}` }), "removal target", 201)
  }
  check(await olga.post("/repos", { name: "app", organization_slug: "acme" }), "app", 201)
  check(await olga.post("/repos", { name: "pub", organization_slug: "acme", is_public: true }), "pub", 201)
  check(await olga.post("/repos", { name: "other", organization_slug: "acme" }), "other", 201)
  // A workflow that runs only when asked for, so the matrix's manual starts have something to run.
  const baseFiles = { "README.md": "hello\n", ".oak/workflows/noop.yml": "on: [manual]\njobs:\n  a:\n    steps: [{run: 'true'}]\n" }
  const base = buildCommit({ branch: "base", files: baseFiles })
  check(await olga.post("/acme/app/push", pushBody({ branch: "base", commits: [base], description: "Base" })), "push", 200)
  check(await olga.post("/acme/app/branches/base/merge"), "merge base", 200)
  const appHead = (await olga.get("/acme/app")).body.head as string

  const fresh = (i: number) => `c${i}`
  const branches: Array<{ branch: string; revertable: string }> = []
  for (let i = 0; i < CALLERS.length; i++) {
    const name = fresh(i)
    check(await olga.post("/repos", { name: `del-${name}`, organization_slug: "acme" }), "delete target", 201)
    check(await olga.post("/repos", { name: `move-${name}`, organization_slug: "acme" }), "transfer target", 201)
    check(await olga.post("/orgs/acme/groups", { slug: `fixed-${name}` }), "group", 201)
    check(await olga.post(`/orgs/acme/groups/fixed-${name}/members`, { username: "adam" }), "group member", 200)
    check(await olga.post("/orgs/acme/service-accounts", { name: `fixed-${name}` }), "account", 201)
    const c = buildCommit({ branch: `b-${name}`, files: { ...baseFiles, [`f-${name}.txt`]: `${i}\n` }, parentHash: appHead, parentSnapshot: base.snapshot })
    check(await olga.post("/acme/app/push", pushBody({ branch: `b-${name}`, commits: [c], description: `Branch ${name}` })), "branch", 200)
    // A second branch whose commit the revert row undoes.
    const r = buildCommit({ branch: `r-${name}`, files: { ...baseFiles, [`r-${name}.txt`]: `${i}\n` }, parentHash: appHead, parentSnapshot: base.snapshot })
    check(await olga.post("/acme/app/push", pushBody({ branch: `r-${name}`, commits: [r], description: `Revert ${name}` })), "branch", 200)
    branches.push({ branch: `b-${name}`, revertable: r.commit.hash })
  }

  // Tokens of every kind.
  const tokens = new Map<string, string | undefined>()
  const personal = async (body: Record<string, unknown>) => {
    const created = await olga.post("/api-keys", body)
    check(created, "personal key", 201)
    return created.body as { id: string; key: string }
  }
  const serviceKey = async (account: string, scopes: string) => {
    const created = await olga.post(`/orgs/acme/service-accounts/${account}/keys`, { name: scopes, scopes })
    check(created, "service key", 201)
    return (created.body as { key: string }).key
  }
  check(await olga.post("/orgs/acme/service-accounts", { name: "matrix-bot" }), "bot", 201)
  check(await olga.post("/orgs/acme/service-accounts", { name: "sleeper" }), "sleeper", 201)
  const expiresAt = Date.now() + 1500
  const expiring = await personal({ name: "expiring", expires_at: new Date(expiresAt).toISOString() })
  for (const caller of CALLERS) {
    let token: string | undefined
    if (caller.kind === "anonymous") token = undefined
    else if (caller.name === "org member") token = keys.get("mia")
    else if (caller.name === "non-member") token = keys.get("zed")
    else if (caller.name === "org admin") token = keys.get("adam")
    else if (caller.name === "owner") token = keys.get("olga")
    else if (caller.name === "personal full key") token = (await personal({ name: "full" })).key
    else if (caller.name === "personal read key") token = (await personal({ name: "read", scope: "read" })).key
    else if (caller.name === "key of another repository") token = (await personal({ name: "other", repo: "acme/other" })).key
    else if (caller.name === "revoked key") {
      const key = await personal({ name: "revoked" })
      check(await olga.delete(`/api-keys/${key.id}`), "revoke", 204)
      token = key.key
    } else if (caller.name === "expired key") token = expiring.key
    else if (caller.dead === "disabled") token = await serviceKey("sleeper", caller.scopes.join(","))
    else token = await serviceKey("matrix-bot", caller.scopes.join(","))
    tokens.set(caller.name, token)
  }
  check(await olga.patch("/orgs/acme/service-accounts/sleeper", { disabled: true }), "disable", 200)
  // Wait until the expiring key has expired.
  await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now() + 100)))
  return { tokens, fresh, branches, appHead }
}

export interface Mismatch {
  readonly caller: string
  readonly endpoint: string
  readonly expected: number
  readonly actual: number
  readonly body: unknown
}

/** Runs every row for every caller; answers the mismatches and the number of cases. */
export const runMatrix = async (urls: ReadonlyArray<string>, world: World) => {
  const mismatches: Array<Mismatch> = []
  let cases = 0
  for (const row of ROWS) {
    await Promise.all(CALLERS.map(async (caller, i) => {
      const url = urls[(cases + i) % urls.length]!
      const want = expected(caller, row.need, row.ok, row.tokenRequired === true)
      // Merges of several branches at once may find main moved (409 main_moved: nothing merged, retry), as a client would.
      let reply = await row.call(api(url, world.tokens.get(caller.name)), i, world)
      for (let attempt = 0; attempt < 20 && reply.status === 409 && (reply.body as { code?: string } | undefined)?.code === "main_moved"; attempt++) {
        reply = await row.call(api(url, world.tokens.get(caller.name)), i, world)
      }
      const body = reply.body as { code?: string; scope?: string; error?: string } | undefined
      let actual = reply.status
      // A 403 for a missing scope must name it.
      if (actual === 403 && want === 403 && body?.code === "missing_scope" && (body.scope === undefined || !body.error?.includes(body.scope))) actual = -403
      if (actual !== want) mismatches.push({ caller: caller.name, endpoint: row.endpoint, expected: want, actual, body: reply.body })
    }))
    cases += CALLERS.length
  }
  return { mismatches, cases }
}
