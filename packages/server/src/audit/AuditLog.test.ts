/**
 * The audit log's read service against a migrated in-memory database (PGlite): rows written by the
 * commands' own writer (`CommandSupport.audit`) come back newest first, one organization at a time,
 * filtered and paged in SQL; details never show a secret.
 */
import { isSince, sinceInstant } from "@grove/api"
import { DbEmbedded, Migrations } from "@grove/storage"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { audit } from "../entities/CommandSupport.ts"
import { AuditLog, isEntryId, redact } from "./AuditLog.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Live = AuditLog.layer.pipe(Layer.provideMerge(Db))

const org = (slug: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = randomUUID()
    yield* sql`INSERT INTO organizations ${sql.insert({ id, slug, name: slug })}`
    return id
  })

layer(Live, { timeout: 60_000 })("AuditLog.list", (it) => {
  it.effect("newest first, only the organization's own entries, with filters and keyset pages", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const log = yield* AuditLog
      const acme = yield* org("acme")
      const other = yield* org("other")
      yield* audit(acme, "ada", "repo.create", "acme/a", { public: false })
      yield* audit(other, "ada", "repo.create", "other/x")
      yield* audit(acme, "ada", "repo.visibility", "acme/a", { public: true })
      yield* audit(acme, "service:deploy", "repo.delete", "acme/a")
      yield* sql`INSERT INTO audit_log ${
        sql.insert({ org_id: acme, actor: "bob", action: "repo.create", target: "acme/old", created_at: "2020-01-01T00:00:00Z" })
      }`

      const all = yield* log.list(acme, {}, { limit: 10 })
      expect(all.map((e) => e.row.action)).toEqual(["repo.create", "repo.delete", "repo.visibility", "repo.create"])
      expect(all.map((e) => e.row.target)).toEqual(["acme/old", "acme/a", "acme/a", "acme/a"])
      expect(all[1]!.row.actor).toBe("service:deploy")
      expect(all[2]!.row.details).toEqual({ public: true })
      expect(all[0]!.row.createdAt).toBeInstanceOf(Date)
      expect(all.every((e) => isEntryId(e.key[0]) && e.key[0] === e.row.id)).toBe(true)

      expect((yield* log.list(acme, { action: "repo.create" }, { limit: 10 })).map((e) => e.row.target)).toEqual(["acme/old", "acme/a"])
      expect((yield* log.list(acme, { actor: "service:deploy" }, { limit: 10 })).map((e) => e.row.action)).toEqual(["repo.delete"])
      expect((yield* log.list(acme, { actor: "ada", action: "repo.create" }, { limit: 10 })).map((e) => e.row.target)).toEqual(["acme/a"])
      expect((yield* log.list(acme, { since: "2021-01-01T00:00:00Z" }, { limit: 10 })).map((e) => e.row.target)).not.toContain("acme/old")
      expect(yield* log.list(acme, { since: "2999-01-01T00:00:00+02:00" }, { limit: 10 })).toEqual([])

      // Pages: limit + 1 rows (the extra one says there is more), then the rows after the last key.
      const first = yield* log.list(acme, {}, { limit: 2 })
      expect(first.map((e) => e.row.id)).toEqual(all.slice(0, 3).map((e) => e.row.id))
      const second = yield* log.list(acme, {}, { limit: 2, after: first[1]!.key })
      expect(second.map((e) => e.row.id)).toEqual(all.slice(2).map((e) => e.row.id))
    }))

  it.effect("a secret planted in details is shown redacted", () =>
    Effect.gen(function*() {
      const log = yield* AuditLog
      const acme = yield* org("planted")
      yield* audit(acme, "ada", "test.secret", "planted/r", { name: "CI_KEY", secret: "s3cr3t", nested: { value: "grove_abcdef" } })
      const [entry] = yield* log.list(acme, {}, { limit: 1 })
      expect(entry!.row.details).toEqual({ name: "CI_KEY", secret: "[redacted]", nested: { value: "[redacted]" } })
      expect(JSON.stringify(entry!.row.details)).not.toContain("s3cr3t")
    }))
})

describe("audit helpers", () => {
  it("redact keeps ordinary details and hides secret-named fields and token-shaped strings", () => {
    expect(redact({ public: true, to: "ada/moved", branch: "ci" })).toEqual({ public: true, to: "ada/moved", branch: "ci" })
    expect(redact({ token: "x", password: "y", list: ["grove_123", "ok"] })).toEqual({ token: "[redacted]", password: "[redacted]", list: ["[redacted]", "ok"] })
  })

  it("isEntryId accepts only positive decimal ids (cursors never reach SQL otherwise)", () => {
    expect(["1", "42", "123456789012345678"].every(isEntryId)).toBe(true)
    expect(["0", "-1", "01", "1.5", "x", "", "1234567890123456789", 5].some(isEntryId)).toBe(false)
  })

  it("isSince accepts ISO 8601 date-times with an offset and every field in range, nothing else", () => {
    expect(["2026-11-24T16:00:00Z", "2026-11-24T16:00Z", "2026-11-24T16:00:00.123456+02:00", "2026-02-30T00:00:00-05:30"].every(isSince)).toBe(true)
    expect(["yesterday", "2026-11-24", "2026-11-24T16:00:00", "0000-01-01T00:00Z", "2026-11-24T24:00:00Z", "2026-11-24T16:60:00Z", "2026-13-01T00:00:00Z"]
      .some(isSince)).toBe(false)
  })

  it("sinceInstant names the instant in UTC with microseconds, rolls impossible days over and clamps the extremes", () => {
    expect(sinceInstant("2026-11-24T16:00:00Z")).toBe("2026-11-24T16:00:00.000000Z")
    expect(sinceInstant("2026-11-24T18:00:00.1234567+02:00")).toBe("2026-11-24T16:00:00.123456Z")
    expect(sinceInstant("2026-11-24T10:30Z")).toBe("2026-11-24T10:30:00.000000Z")
    expect(sinceInstant("2026-02-30T00:00:00Z")).toBe("2026-03-02T00:00:00.000000Z")
    expect(sinceInstant("0001-01-01T00:00:00+23:59")).toBe("1000-01-01T00:00:00.000000Z")
    expect(sinceInstant("9999-12-31T23:59:59-23:59")).toBe("9999-12-31T23:59:59.999000Z")
    expect(sinceInstant("0099-06-01T00:00Z")).toBe("1000-01-01T00:00:00.000000Z")
    expect(sinceInstant("nope")).toBeUndefined()
  })
})
