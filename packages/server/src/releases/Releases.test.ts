/**
 * The release rows against a migrated in-memory database (PGlite): a version and platform is written
 * once (the primary key is the compare-and-set: a second insert answers false and writes no audit
 * entry), the audit entry goes with the row, and the list is newest first by semver, not by text.
 */
import { DbEmbedded, Migrations, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { Releases } from "./Releases.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const storeRoot = tempDirectory("grove-releases-unit-")
const Store = ObjectStoreLocal.layer({ root: storeRoot }).pipe(Layer.orDie)
const Live = Releases.layer.pipe(Layer.provideMerge(Db), Layer.provide(Store))

const release = (version: string, orgId: string) => ({
  version,
  platform: "linux-x86_64",
  sha256: "ab".repeat(32),
  size: 10,
  minisig: "sig",
  publishedBy: "service:1",
  orgId
})

layer(Live, { timeout: 60_000, excludeTestServices: true })("Releases", (it) => {
  it.effect("writes a version and platform once, with its audit entry, and lists newest first by semver", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const releases = yield* Releases
      const orgId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "grove-dev", name: "Grove" })}`
      for (const version of ["1.9.0", "1.10.0", "1.10.0-rc.1"]) expect(yield* releases.insert(release(version, orgId))).toBe(true)
      expect(yield* releases.insert({ ...release("1.9.0", orgId), sha256: "cd".repeat(32) })).toBe(false)
      const kept = yield* releases.find("1.9.0", "linux-x86_64")
      expect(Option.map(kept, (r) => r.sha256)).toEqual(Option.some("ab".repeat(32)))
      expect((yield* releases.list).map((r) => r.version)).toEqual(["1.10.0", "1.10.0-rc.1", "1.9.0"])
      const audited = yield* sql<{ target: string }>`SELECT target FROM audit_log WHERE org_id = ${orgId} AND action = 'release.publish' ORDER BY id`
      expect(audited.map((row) => row.target)).toEqual(["1.9.0/linux-x86_64", "1.10.0/linux-x86_64", "1.10.0-rc.1/linux-x86_64"])
    }))
})
