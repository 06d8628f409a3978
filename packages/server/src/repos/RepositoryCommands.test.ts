/**
 * Issue 24: a PATCH of a repository's visibility (the merge benchmark's baseline command) answers the row its
 * UPDATE wrote (`RETURNING`): the repository is read once in the command, under its lock, not again after.
 * Its event is written with the reply, in one statement (no INSERT of its own): the command's transaction is
 * BEGIN, the fence with the inbox row, the locked read with the UPDATE and the audit row (one statement), the
 * reply with the event, COMMIT. 7 before: the locked read, the UPDATE and the audit row were three.
 * Its note for the sending node is the row's version as written (not stored, not answered).
 */
import { EntityRuntime } from "@grove/bus"
import { expect, layer } from "@effect/vitest"
import { Migrations } from "@grove/storage"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { repositoryColumns, type RepositoryRecord, toApiRepository } from "../access/RepositoryRecord.ts"
import { quietRuntime, repositoryRows } from "../entities/Commands.testing.ts"
import { repositorySlice } from "../entities/EntitySlices.ts"
import { countedDatabase } from "../merges/MergeFixtures.testing.ts"
import * as RepositoryCommands from "./RepositoryCommands.ts"

const { traffic, layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Repository = repositorySlice(RepositoryCommands.commands)
const Runtime = quietRuntime("repository-commands")
const Node = EntityRuntime.EntityRuntime.register(Repository, RepositoryCommands.handlers).pipe(
  Layer.provideMerge(Runtime),
  Layer.provideMerge(Db)
)

layer(Node, { timeout: 60_000, excludeTestServices: true })("Repository.setVisibility", (it) => {
  it.effect("answers the row as written, reading the repository once (under its lock)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const runtime = yield* EntityRuntime.EntityRuntime
      const { key, repoId } = yield* repositoryRows("vis")
      const stored = () =>
        sql<RepositoryRecord>`SELECT ${repositoryColumns(sql)} FROM repositories r JOIN organizations o ON o.id = r.org_id
          WHERE r.id = ${repoId}`.pipe(Effect.map((rows) => toApiRepository(rows[0]!)))
      const before = yield* stored()
      for (const [i, isPublic] of [true, false, true].entries()) {
        const start = traffic.statements.length
        const { value: answered, note } = yield* runtime.sendNoted(Repository, key, "SetVisibility", { isPublic, actor: "t" })
        const statements = traffic.statements.slice(start)
        // The first command also meets the partitions' first claims and the relay's first reads.
        if (i > 0) expect(statements, statements.map((s, n) => `${n + 1}. ${s.slice(0, 100)}`).join("\n")).toHaveLength(5)
        expect(statements.filter((s) => s.startsWith("INSERT INTO event_outbox")), "no statement of its own for the event").toEqual([])
        const [event] = yield* sql<{ readonly payload: { readonly is_public?: unknown } }>`SELECT payload FROM event_outbox
          WHERE payload->>'type' = 'repository.visibility_changed' AND payload->>'repository_id' = ${repoId} ORDER BY id DESC LIMIT 1`
        expect(event?.payload.is_public, "the event is stored with the command").toBe(isPublic)
        const repositoryReads = traffic.statements.slice(start).filter((s) => /SELECT .* FROM repositories r JOIN/.test(s))
        expect(repositoryReads, "one locked read, none after the UPDATE").toHaveLength(1)
        expect(repositoryReads[0]).toMatch(/FOR UPDATE/)
        // The answer is the row as stored now: owner, name, the new visibility, version and time moved.
        expect(answered).toEqual(yield* stored())
        expect(answered.is_public).toBe(isPublic)
        expect(answered.full_name).toBe("vis/r")
        expect(answered.created_at).toBe(before.created_at)
        // The sending node gets the row's version as written (to cache the record without a read); the caller does not.
        const [row] = yield* sql<{ version: number; updatedAt: Date }>`SELECT version, updated_at AS "updatedAt" FROM repositories WHERE id = ${repoId}`
        expect(note).toEqual({ version: row!.version, updated_at: row!.updatedAt.toISOString() })
        expect(answered).not.toHaveProperty("version")
      }
      const audited = () =>
        sql<{ n: number }>`SELECT count(*)::int AS n FROM audit_log WHERE action = 'repo.visibility' AND target = 'vis/r'`.pipe(
          Effect.map((rows) => rows[0]!.n)
        )
      expect(yield* audited(), "an audit row per change").toBe(3)
      // The visibility it already has: answered as stored, nothing written.
      const unchanged = yield* stored()
      const { value: again, note } = yield* runtime.sendNoted(Repository, key, "SetVisibility", { isPublic: true, actor: "t" })
      expect(again).toEqual(unchanged)
      expect(yield* stored()).toEqual(unchanged)
      // Its note says so, with the row's version as found: the sending node keeps its record of that version.
      const [row] = yield* sql<{ version: number; updatedAt: Date }>`SELECT version, updated_at AS "updatedAt" FROM repositories WHERE id = ${repoId}`
      expect(note).toEqual({ version: row!.version, updated_at: row!.updatedAt.toISOString(), unchanged: true })
      expect(yield* audited()).toBe(3)
    }))
})
