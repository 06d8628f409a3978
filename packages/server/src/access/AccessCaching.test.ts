/**
 * The access caches against a migrated embedded database (PGlite) with the change notifications
 * followed (`AccessNotificationsLive`): a change committed by any SQL, no handler's invalidation
 * involved, is seen by the very next read (a repository's head and visibility, a key's revocation,
 * a membership removed). And they do cache: the same change made with the triggers switched off
 * (`session_replication_role = replica`, so nothing is notified) is not seen.
 */
import { expect, layer } from "@effect/vitest"
import { DbEmbedded, Migrations } from "@grove/storage"
import { Effect, Exit, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { AccessCaches } from "../cache/AccessCaches.ts"
import { AccessNotificationsLive } from "../cache/AccessNotifications.ts"
import { Identity } from "./Identity.ts"
import { Organizations } from "./Organizations.ts"
import { afterRepositoryWrite, Repositories } from "./Repositories.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Reads = Layer.mergeAll(Identity.layer, Organizations.layer, Repositories.layer).pipe(Layer.provideMerge(AccessCaches.layer))
const Live = AccessNotificationsLive.pipe(Layer.provideMerge(Reads), Layer.provideMerge(Db))

/** Runs `statement` with the triggers off: a change nobody is told of. */
const unnotified = <A, E, R>(statement: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SET LOCAL session_replication_role = replica`
      return yield* statement
    }))
  })

/** The caches come on once the LISTEN is in place (the follower's first step). */
const cachesOn = Effect.gen(function*() {
  const caches = yield* AccessCaches
  for (let i = 0; !caches.live(); i++) {
    if (i > 600) throw new Error("the access caches never came on")
    yield* Effect.sleep("50 millis")
  }
})

layer(Live, { timeout: 120_000, excludeTestServices: true })("access caches, embedded", (it) => {
  it.effect("a repository's head and visibility changed by any SQL are seen by the next read; unnotified, the cached record stays", () =>
    Effect.gen(function*() {
      yield* cachesOn
      const sql = yield* SqlClient.SqlClient
      const identity = yield* Identity
      const repositories = yield* Repositories
      yield* identity.createUser({ username: "ada", admin: false })
      const [org] = yield* sql<{ id: string }>`SELECT id FROM organizations WHERE slug = 'ada'`
      const id = randomUUID()
      yield* sql`INSERT INTO repositories ${sql.insert({ id, org_id: org!.id, name: "Probe", is_public: true })}`
      // A function: the cache answers at the call (a hit is decided then, not when the effect runs).
      const read = () => repositories.findByFullName("ada", "probe").pipe(Effect.map(Option.getOrThrow))
      expect((yield* read()).head).toBeNull()

      yield* unnotified(sql`UPDATE repositories SET head = 'unnotified' WHERE id = ${id}`)
      expect((yield* read()).head).toBeNull()

      yield* sql`UPDATE repositories SET head = 'h1', updated_at = now() WHERE id = ${id}`
      expect((yield* read()).head).toBe("h1")
      yield* sql`UPDATE repositories SET is_public = false WHERE id = ${id}`
      expect((yield* read()).isPublic).toBe(false)
      yield* sql`DELETE FROM repositories WHERE id = ${id}`
      expect(Option.isNone(yield* repositories.findByFullName("ada", "probe"))).toBe(true)
    }))

  it.effect("a write's record as it landed is kept without a read when exact; a change between or after it forgets it", () =>
    Effect.gen(function*() {
      yield* cachesOn
      const sql = yield* SqlClient.SqlClient
      const identity = yield* Identity
      const repositories = yield* Repositories
      yield* identity.createUser({ username: "dee", admin: false })
      const [org] = yield* sql<{ id: string }>`SELECT id FROM organizations WHERE slug = 'dee'`
      const id = randomUUID()
      yield* sql`INSERT INTO repositories ${sql.insert({ id, org_id: org!.id, name: "Landed", is_public: true })}`
      const read = () => repositories.findByFullName("dee", "landed").pipe(Effect.map(Option.getOrThrow))
      /** A merge's write of the head (notified), as it reports the row: its version and updated_at. */
      const write = (head: string) =>
        sql<{ version: number; updatedAt: Date }>`UPDATE repositories SET head = ${head}, updated_at = now(), version = version + 1
          WHERE id = ${id} RETURNING version, updated_at AS "updatedAt"`.pipe(Effect.map((rows) => ({ head, ...rows[0]! })))

      // The write's own notification not yet arrived (cluster: LISTEN, ms later): the record cached before the write
      // (the handler's authorization read) is replaced, not kept.
      const cached = yield* read()
      const early = yield* unnotified(write("m0"))
      yield* repositories.landed(cached, early, repositories.changesSeen())
      expect(yield* read()).toEqual({ ...cached, head: "m0", version: cached.version + 1, updatedAt: early.updatedAt })

      const before = yield* read()
      let since = repositories.changesSeen()
      const landed = yield* write("m1")
      yield* repositories.landed(before, landed, since)
      // Kept as written: an unnotified change is not seen, so the record was not read again.
      yield* unnotified(sql`UPDATE repositories SET head = 'unnotified' WHERE id = ${id}`)
      expect(yield* read()).toEqual({ ...before, head: "m1", version: before.version + 1, updatedAt: landed.updatedAt })
      yield* unnotified(sql`UPDATE repositories SET head = 'm1' WHERE id = ${id}`)

      // Another change landed between the record and the write: the version skips one, the record is forgotten.
      const kept = yield* read()
      since = repositories.changesSeen()
      yield* sql`UPDATE repositories SET is_public = false, version = version + 1 WHERE id = ${id}`
      yield* repositories.landed(kept, yield* write("m2"), since)
      expect(yield* read()).toMatchObject({ head: "m2", isPublic: false, version: kept.version + 2 })

      // A change notified after the write: forgotten too.
      const current = yield* read()
      since = repositories.changesSeen()
      const third = yield* write("m3")
      yield* sql`UPDATE repositories SET description = 'later', version = version + 1 WHERE id = ${id}`
      yield* repositories.landed(current, third, since)
      expect(yield* read()).toMatchObject({ head: "m3", description: "later", version: current.version + 2 })
    }))

  it.effect("a command that wrote nothing keeps the sender's record of the same version; of another version it is forgotten", () =>
    Effect.gen(function*() {
      yield* cachesOn
      const sql = yield* SqlClient.SqlClient
      const identity = yield* Identity
      const repositories = yield* Repositories
      yield* identity.createUser({ username: "una", admin: false })
      const [org] = yield* sql<{ id: string }>`SELECT id FROM organizations WHERE slug = 'una'`
      const id = randomUUID()
      yield* sql`INSERT INTO repositories ${sql.insert({ id, org_id: org!.id, name: "Same", is_public: true })}`
      const read = () => repositories.findByFullName("una", "same").pipe(Effect.map(Option.getOrThrow))
      /** A PATCH of the visibility it has (RepositoryCommands.setVisibility): answered with this note, nothing written. */
      const unchangedAt = (version: number, updatedAt: Date) =>
        Exit.succeed({ value: undefined, note: { version, updated_at: updatedAt.toISOString(), unchanged: true } })

      const before = yield* read()
      yield* afterRepositoryWrite(repositories, before, { isPublic: true }, repositories.changesSeen())(unchangedAt(before.version, before.updatedAt))
      // Kept: an unnotified change is not seen, so the record was not read again.
      yield* unnotified(sql`UPDATE repositories SET description = 'unnotified' WHERE id = ${id}`)
      expect(yield* read()).toEqual(before)

      // The row changed since the record was read (unnotified here): the note's version differs, the record is forgotten.
      const [moved] = yield* unnotified(
        sql<{ version: number; updatedAt: Date }>`UPDATE repositories SET head = 'm1', version = version + 1 WHERE id = ${id}
          RETURNING version, updated_at AS "updatedAt"`
      )
      yield* afterRepositoryWrite(repositories, before, { isPublic: true }, repositories.changesSeen())(unchangedAt(moved!.version, moved!.updatedAt))
      expect(yield* read()).toMatchObject({ head: "m1", description: "unnotified", version: before.version + 1 })
    }))

  it.effect("a key revoked and a membership removed by any SQL are seen by the next request; unnotified, they are not", () =>
    Effect.gen(function*() {
      yield* cachesOn
      const sql = yield* SqlClient.SqlClient
      const identity = yield* Identity
      const organizations = yield* Organizations
      const { user, apiKey } = yield* identity.createUser({ username: "bea", admin: false })
      const [org] = yield* sql<{ id: string }>`SELECT id FROM organizations WHERE slug = 'bea'`
      const principal = { kind: "user", userId: user.id, username: "bea", siteAdmin: false } as const
      expect((yield* identity.authenticate(apiKey)).principal).toEqual(principal)
      expect(yield* organizations.roleOf(org!.id, principal)).toBe("owner")

      yield* unnotified(sql`UPDATE tokens SET revoked_at = now() WHERE user_id = ${user.id}`)
      expect((yield* identity.authenticate(apiKey)).principal).toEqual(principal)
      yield* unnotified(sql`DELETE FROM memberships WHERE user_id = ${user.id}`)
      expect(yield* organizations.roleOf(org!.id, principal)).toBe("owner")

      // Notified: a later write on the same tables (here a no-op one) is enough to forget them.
      yield* sql`UPDATE tokens SET revoked_at = revoked_at WHERE user_id = ${user.id}`
      expect((yield* Effect.flip(identity.authenticate(apiKey)))._tag).toBe("InvalidToken")
      yield* sql`INSERT INTO memberships ${sql.insert({ org_id: org!.id, user_id: user.id, role: "member" })}`
      expect(yield* organizations.roleOf(org!.id, principal)).toBe("member")
      yield* sql`DELETE FROM memberships WHERE user_id = ${user.id}`
      expect(yield* organizations.roleOf(org!.id, principal)).toBeUndefined()
    }))

  it.effect("a last use recorded or a push's accounting does not empty the caches", () =>
    Effect.gen(function*() {
      yield* cachesOn
      const sql = yield* SqlClient.SqlClient
      const identity = yield* Identity
      const { user, apiKey } = yield* identity.createUser({ username: "cy", admin: false })
      yield* identity.authenticate(apiKey)
      yield* unnotified(sql`UPDATE tokens SET revoked_at = now() WHERE user_id = ${user.id}`)
      yield* sql`UPDATE tokens SET last_used_at = now() WHERE user_id = ${user.id}`
      yield* sql`UPDATE organizations SET used_bytes = used_bytes + 1 WHERE slug = 'cy'`
      // Still the cached (unrevoked) row: neither write was taken for an access change.
      expect((yield* identity.authenticate(apiKey)).principal.kind).toBe("user")
    }))
})
