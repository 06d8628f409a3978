/**
 * Published client releases: the read side (list, latest, one record, the binary's bytes) and the
 * write of a new one. A release is one row (version, platform) and its binary in the object store
 * under its SHA-256 (namespace `releases`, which no organization id can take); the row's primary
 * key makes a version impossible to overwrite, and the row and its audit entry are one transaction.
 */
import { compareVersions } from "@grove/core/release/Versions"
import { ObjectStore } from "@grove/storage"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { audit } from "../entities/CommandSupport.ts"

export const RELEASE_NAMESPACE = "releases"

export interface ReleaseRecord {
  readonly version: string
  readonly platform: string
  readonly sha256: string
  readonly size: number
  readonly minisig: string
  readonly publishedBy: string
  readonly publishedAt: Date
}

export interface NewRelease {
  readonly version: string
  readonly platform: string
  readonly sha256: string
  readonly size: number
  readonly minisig: string
  readonly publishedBy: string
  /** The publishing organization, for its audit log. */
  readonly orgId: string
}

interface Row {
  version: string
  platform: string
  sha256: string
  size: string | number
  minisig: string
  publishedBy: string
  publishedAt: Date
}

const recordOf = (row: Row): ReleaseRecord => ({ ...row, size: Number(row.size) })

/** Newest version first; platforms by name within a version. */
const newestFirst = (a: ReleaseRecord, b: ReleaseRecord) =>
  compareVersions(b.version, a.version) || a.platform.localeCompare(b.platform)

export class Releases extends Context.Service<Releases, {
  readonly list: Effect.Effect<ReadonlyArray<ReleaseRecord>, SqlError>
  readonly find: (version: string, platform: string) => Effect.Effect<Option.Option<ReleaseRecord>, SqlError>
  /** Inserts the row and its audit entry; false when the version and platform exist already. */
  readonly insert: (release: NewRelease) => Effect.Effect<boolean, SqlError>
  readonly bytes: (sha256: string) => ReturnType<ObjectStore.ObjectStore["Service"]["get"]>
}>()("grove/server/releases/Releases") {
  static readonly layer = Layer.effect(Releases, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const store = yield* ObjectStore.ObjectStore
    const columns = sql`version, platform, sha256, size::text AS size, minisig, published_by AS "publishedBy", published_at AS "publishedAt"`
    return Releases.of({
      // Releases are few (versions times platforms): sorted here by semver, which SQL cannot.
      list: sql<Row>`SELECT ${columns} FROM releases`.pipe(Effect.map((rows) => rows.map(recordOf).sort(newestFirst))),
      find: (version, platform) =>
        sql<Row>`SELECT ${columns} FROM releases WHERE version = ${version} AND platform = ${platform}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), recordOf))
        ),
      insert: (release) =>
        sql.withTransaction(Effect.gen(function*() {
          const inserted = yield* sql<{ version: string }>`INSERT INTO releases ${
            sql.insert({
              version: release.version,
              platform: release.platform,
              sha256: release.sha256,
              size: release.size,
              minisig: release.minisig,
              published_by: release.publishedBy
            })
          } ON CONFLICT (version, platform) DO NOTHING RETURNING version`
          if (inserted.length === 0) return false
          yield* audit(release.orgId, release.publishedBy, "release.publish", `${release.version}/${release.platform}`, {
            sha256: release.sha256,
            size: release.size
          })
          return true
        })).pipe(Effect.provideService(SqlClient.SqlClient, sql)),
      bytes: (sha256) => store.get({ namespace: RELEASE_NAMESPACE, hash: sha256 })
    })
  }))
}
