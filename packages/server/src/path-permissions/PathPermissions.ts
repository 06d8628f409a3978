/**
 * Path permissions: `.oak/PERMISSIONS` on `main`, parsed (core `Permissions`), and what one caller
 * may read of a repository. Callers not granted a restricted path see the tree but not the content.
 *
 * - The file is read at main's head and its parse cached by (repository, head): a repository without
 *   the file costs one branch lookup (cached by the branch service) and one cached tree walk of two levels.
 * - Owners and admins of the organization (and instance admins) read everything; everyone else holds
 *   their user name and their groups (`@org/group`) in the repository's organization. A service-account
 *   key holds only `*` (and its creator's role, which may make it an admin); an anonymous caller of a
 *   public repository holds only `*`.
 * - Content is addressed by hash, so a blob is withheld from a caller when, in the trees considered,
 *   it sits only at paths they may not read (the same bytes at a readable path are readable anyway).
 *   Hash-addressed reads (`blobs/info`, chunk downloads) serve a blob the caller may read at some path of
 *   a published commit (`readableOf`); a pull considers the commits it sends. A chunk is served when it
 *   belongs to a blob served.
 * - Dedup (`DedupScope`) asks the other way round: which blobs the caller can read at a branch head
 *   (`readableAtHeads`), for every repository of the organization it reads (`policies`, one query for
 *   all their main heads; nothing at all for an admin).
 */
import type { Caller } from "@grove/api"
import { Access, Permissions } from "@grove/core"
import * as Tree from "@grove/core/objects/Tree"
import { Context, Effect, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { createHash } from "node:crypto"
import { AccessCaches } from "../cache/AccessCaches.ts"
import { TtlCache } from "../cache/TtlCache.ts"
import { Branches } from "../content/Branches.ts"
import { type ChunkReadError, ChunkStore } from "../content/ChunkStore.ts"
import { CommitPaths } from "../content/CommitPaths.ts"
import { ContentObjects } from "../content/ContentObjects.ts"

/** The repository as the policy needs it (what `Authorizer.repository` answers). */
export interface RepositoryRef {
  readonly id: string
  readonly orgId: string
  readonly owner: string
  readonly callerRole: Access.Role | undefined
}

/** The file on main, as the server parsed it. */
export interface LoadedPermissions {
  /** Main's head commit the file was read at. */
  readonly head: string
  readonly file: Permissions.PermissionsFile
}

/** What one caller may read of one repository. */
export interface Policy {
  /** Nothing is withheld: no file on main, or the caller reads everything. */
  readonly open: boolean
  readonly canRead: (path: string) => boolean
  /** Names this view of the repository (main's head and the caller's principals), for caches of filtered content; "" when open. */
  readonly viewKey: string
}

const OPEN: Policy = { open: true, canRead: () => true, viewKey: "" }
const MAIN = "main"
const PERMISSIONS_SEGMENTS = Permissions.PERMISSIONS_PATH.split("/")

export class PathPermissions extends Context.Service<PathPermissions, {
  /** The file on main, or undefined when main has none. */
  readonly load: (repo: RepositoryRef) => Effect.Effect<LoadedPermissions | undefined, SqlError | ChunkReadError>
  readonly policy: (caller: Caller, repo: RepositoryRef) => Effect.Effect<Policy, SqlError | ChunkReadError>
  /** Blobs withheld from `policy` in the trees under `roots` (root tree hashes). */
  readonly withheldIn: (policy: Policy, orgId: string, roots: ReadonlyArray<string>) => Effect.Effect<ReadonlySet<string>, SqlError>
  /** Blobs withheld from `policy` at the heads of the repository's branches. */
  readonly withheldAtHeads: (policy: Policy, repo: RepositoryRef) => Effect.Effect<ReadonlySet<string>, SqlError>
  /** The policy of each repository (all of one organization, the caller's role in it given). */
  readonly policies: (caller: Caller, repos: ReadonlyArray<RepositoryRef>) => Effect.Effect<Map<string, Policy>, SqlError | ChunkReadError>
  /** Blobs `policy` may read at the heads of the repository's branches (the same bytes elsewhere do not count). */
  readonly readableAtHeads: (policy: Policy, repo: RepositoryRef) => Effect.Effect<ReadonlySet<string>, SqlError>
  /**
   * Of `blobs`, those `policy` may read at some path of a published commit: the heads first, the whole
   * history only for what the heads do not answer (an old version, or content that only ever sat at a
   * withheld path). Hash-addressed reads (`blobs/info`, chunk downloads) serve only these.
   */
  readonly readableOf: (policy: Policy, repo: RepositoryRef, blobs: ReadonlyArray<string>) => Effect.Effect<Set<string>, SqlError>
}>()("grove/server/path-permissions/PathPermissions") {
  static readonly layer = Layer.effect(PathPermissions, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const branches = yield* Branches
    const objects = yield* ContentObjects
    const paths = yield* CommitPaths
    const chunks = yield* ChunkStore
    const caches = yield* AccessCaches
    // Parses by main's head: a head never changes content, so these stay right; the TTL only bounds memory.
    const parsed = new TtlCache<string, LoadedPermissions | undefined>(60_000, { maxEntries: 10_000 })
    const groups = new TtlCache<string, ReadonlyArray<string>>(2_000)
    caches.register(groups)

    const readBlob = (orgId: string, hash: string) =>
      Effect.gen(function*() {
        const info = (yield* objects.blobInfo(orgId, [hash])).get(hash)
        if (info === undefined) return new Uint8Array(0)
        // Past the limit the parser locks down on size alone; no need to read more than one byte beyond.
        const parts: Array<Uint8Array> = []
        let size = 0
        for (const chunk of info.chunks) {
          if (size > Permissions.MAX_FILE_BYTES) break
          yield* Stream.runForEach(chunks.read(orgId, chunk.hash), (bytes) => Effect.sync(() => {
            parts.push(bytes)
            size += bytes.length
          }))
        }
        const whole = new Uint8Array(Buffer.concat(parts))
        return whole
      })

    // Readable blobs by (repository, view, heads): heads are commits, so a hit is exact; pushes of one
    // caller ask for it several times (blobs/check, chunks/check, push) while the heads stay put.
    const readableCache = new TtlCache<string, ReadonlySet<string>>(60_000, { maxEntries: 64 })

    const load = (repo: RepositoryRef) =>
      Effect.gen(function*() {
        const main = yield* branches.get(repo.id, MAIN)
        return yield* loadAt(repo, main?.head ?? null)
      })

    const loadAt = (repo: RepositoryRef, head: string | null) =>
      Effect.gen(function*() {
        if (head === null) return undefined
        return yield* parsed.get(`${repo.id}:${head}`, Effect.gen(function*() {
          const commit = (yield* objects.loadCommitHeaders(repo.id, [head])).get(head)
          if (commit === undefined) return undefined
          const target = yield* paths.resolvePath(repo.orgId, commit.manifest_hash, PERMISSIONS_SEGMENTS)
          if (target === undefined || target.kind !== "blob") return undefined
          const bytes = yield* readBlob(repo.orgId, target.hash)
          return { head, file: Permissions.parsePermissionsBytes(bytes) }
        }))
      })

    /** The caller's groups in the organization, as `org/group`. */
    const groupsOf = (orgId: string, orgSlug: string, userId: string) =>
      groups.get(
        `${orgId}:${userId}`,
        sql<{ slug: string }>`SELECT g.slug FROM org_groups g JOIN group_members m ON m.group_id = g.id
          WHERE g.org_id = ${orgId} AND m.user_id = ${userId}`.pipe(Effect.map((rows) => rows.map((r) => `${orgSlug}/${r.slug}`)))
      )

    const policy = (caller: Caller, repo: RepositoryRef) =>
      Effect.gen(function*() {
        // Admins read everything: no need to read the file.
        if (Access.holdsRole(caller.principal, repo.callerRole, "admin")) return OPEN
        return yield* policyOf(caller, repo, yield* load(repo))
      })

    const policyOf = (caller: Caller, repo: RepositoryRef, loaded: LoadedPermissions | undefined) =>
      Effect.gen(function*() {
        if (loaded === undefined) return OPEN
        if (Access.holdsRole(caller.principal, repo.callerRole, "admin")) return OPEN
        const principal = caller.principal
        const holder: Permissions.Caller = principal.kind === "user"
          ? { user: principal.username, groups: yield* groupsOf(repo.orgId, repo.owner, principal.userId) }
          : {}
        const check = Permissions.accessChecker(loaded.file, holder)
        const held = [...Permissions.callerPrincipals(holder)].sort().join(" ")
        const viewKey = createHash("sha256").update(`${loaded.head}\n${held}`).digest("hex").slice(0, 32)
        return { open: false, canRead: (path: string) => check(path).granted, viewKey } satisfies Policy
      })

    /** The blobs under `roots` at paths `policy` may read, and those at paths it may not. */
    const classify = (policy: Policy, orgId: string, roots: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const readable = new Set<string>()
        const hidden = new Set<string>()
        const seen = new Set<string>()
        let level: Array<{ readonly hash: string; readonly prefix: string }> = roots.map((hash) => ({ hash, prefix: "" }))
        while (level.length > 0) {
          const fresh = level.filter((t) => {
            const key = `${t.hash}\u0000${t.prefix}`
            if (seen.has(key)) return false
            seen.add(key)
            return true
          })
          const trees = yield* objects.loadTrees(orgId, [...new Set(fresh.map((t) => t.hash))])
          const next: Array<{ readonly hash: string; readonly prefix: string }> = []
          for (const { hash, prefix } of fresh) {
            for (const entry of trees.get(hash) ?? []) {
              const path = `${prefix}${entry.name}`
              if (entry.kind === "tree") next.push({ hash: entry.hash, prefix: `${path}/` })
              else if (Tree.isBlobMode(entry.mode)) (policy.canRead(path) ? readable : hidden).add(entry.hash)
            }
          }
          level = next
        }
        return { readable, hidden }
      })

    const withheldIn = (policy: Policy, orgId: string, roots: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (policy.open) return new Set<string>()
        const { hidden, readable } = yield* classify(policy, orgId, roots)
        for (const hash of readable) hidden.delete(hash)
        return hidden
      })

    const headManifests = (repo: RepositoryRef) =>
      Effect.gen(function*() {
        const heads = (yield* branches.list(repo.id)).flatMap((b) => b.head == null ? [] : [b.head])
        const commits = yield* objects.loadCommitHeaders(repo.id, heads)
        return [...new Set([...commits.values()].map((c) => c.manifest_hash))].sort()
      })

    /** The blobs `policy` may read under `roots`, cached by the roots (commits never change). */
    const readableUnder = (policy: Policy, repo: RepositoryRef, what: string, roots: ReadonlyArray<string>) => {
      const key = createHash("sha256").update(`${repo.id}\n${policy.viewKey}\n${what}\n${roots.join(",")}`).digest("hex")
      return readableCache.get(key, Effect.map(classify(policy, repo.orgId, roots), (c) => c.readable))
    }

    const readableAtHeads = (policy: Policy, repo: RepositoryRef) =>
      Effect.flatMap(headManifests(repo), (roots) => readableUnder(policy, repo, "heads", roots))

    return PathPermissions.of({
      load,
      policy,
      withheldIn,
      withheldAtHeads: (policy, repo) =>
        policy.open ? Effect.succeed(new Set<string>()) : Effect.gen(function*() {
          return yield* withheldIn(policy, repo.orgId, yield* headManifests(repo))
        }),
      policies: (caller, repos) =>
        Effect.gen(function*() {
          const out = new Map<string, Policy>()
          const rest = repos.filter((r) => {
            if (!Access.holdsRole(caller.principal, r.callerRole, "admin")) return true
            out.set(r.id, OPEN)
            return false
          })
          if (rest.length === 0) return out
          // One query for every main head; the parse is cached by head, so most repositories cost nothing more.
          const rows = yield* sql<{ repo_id: string; head: string | null }>`SELECT repo_id::text AS repo_id, head FROM branches
            WHERE repo_id = ANY(${rest.map((r) => r.id)}::uuid[]) AND name = ${MAIN}`
          const heads = new Map(rows.map((r) => [r.repo_id, r.head]))
          for (const repo of rest) out.set(repo.id, yield* policyOf(caller, repo, yield* loadAt(repo, heads.get(repo.id) ?? null)))
          return out
        }),
      readableAtHeads,
      readableOf: (policy, repo, blobs) =>
        Effect.gen(function*() {
          if (policy.open) return new Set(blobs)
          const heads = yield* readableAtHeads(policy, repo)
          const found = new Set(blobs.filter((h) => heads.has(h)))
          const rest = blobs.filter((h) => !found.has(h))
          if (rest.length === 0) return found
          const roots = (yield* sql<{ manifest_hash: string }>`SELECT DISTINCT manifest_hash FROM commits
            WHERE repo_id = ${repo.id} AND published`).map((r) => r.manifest_hash).sort()
          const history = yield* readableUnder(policy, repo, "history", roots)
          for (const h of rest) if (history.has(h)) found.add(h)
          return found
        })
    })
  }))
}
