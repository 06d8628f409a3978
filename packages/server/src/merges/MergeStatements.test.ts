/**
 * Issue 24: merges on one repository are serialized, so their rate is one over a merge's latency, and on
 * the embedded database each SQL statement is a good part of it. This pins the statements of one merge
 * from its planning to its event on the bus: planned as the handler does, sent through the entity runtime
 * (the sender's inbox row, the command's transaction on the partition's worker, the reply) and relayed
 * from the outbox, on a counted connection to a migrated in-memory PGlite. A statement added back to the
 * path fails it.
 */
import { Bus, EntityRuntime, Topics } from "@grove/bus"
import { expect, layer } from "@effect/vitest"
import { Migrations } from "@grove/storage"
import { Deferred, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { buildCommit, type Files } from "../../../../test/support/content.ts"
import { Branches } from "../content/Branches.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { History } from "../content/History.ts"
import { PlanningTrees } from "./PlanningTrees.ts"
import { repositorySlice } from "../entities/EntitySlices.ts"
import * as MergeCommand from "./MergeCommand.ts"
import { branchRow, countedDatabase, storeCommit } from "./MergeFixtures.testing.ts"
import { quietRuntime, repositoryRows } from "../entities/Commands.testing.ts"
import { mergePayload, planMerge } from "./MergePlanner.ts"

const { traffic, layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Content = Layer.mergeAll(Branches.layer, History.layer, PlanningTrees.layer).pipe(Layer.provideMerge(ContentObjects.layer))
const Repository = repositorySlice(MergeCommand.commands)
const Runtime = quietRuntime("statements")
const Handlers = EntityRuntime.EntityRuntime.register(Repository, MergeCommand.handlers)
const Node = Handlers.pipe(Layer.provideMerge(Runtime), Layer.provideMerge(Content), Layer.provideMerge(Db))

/**
 * What one merge runs, in order: planning (the branch and main with both heads' commit headers, the CI
 * gate's runs and the branch's root tree in one read, one round of trees: the branch's directory on the way
 * to its change, the squash commit's trees with its row in one statement) and the command's transaction (BEGIN,
 * the fence with the inbox row, the landing (returning its event row), the reply, COMMIT); the relay
 * publishes those rows without reading them. The ancestry reads nothing: the heads' rows came with the branches,
 * their parents are known from earlier merges; main's and the base's trees neither: the earlier merges built or
 * read them (PlanningTrees.ts). 9 before: the squash commit's trees and its row were two statements. 10 before: two rounds of trees (the three roots, then the changed directories). 13
 * before that: the CI gate, the heads' commit headers and their ancestry edges were reads of their own. 14 before that: the branch and main were
 * two reads. 17 before
 * that: the sender wrote the inbox row before sending, and the relay read the event back and marked it
 * published, one statement each per merge. 22 before that: a
 * repo_trees read in planning, and in the transaction the fence and the inbox read apart, a savepoint and
 * its release around the handler, the repository's lock apart.
 */
const EXPECTED = 8

layer(Node, { timeout: 60_000, excludeTestServices: true })("one merge's SQL statements", (it) => {
  it.effect("from planning to the relayed event, a merge runs a fixed number of statements", () =>
    Effect.gen(function*() {
      const runtime = yield* EntityRuntime.EntityRuntime
      const bus = yield* Bus.Bus
      const { orgId, repoId, key } = yield* repositoryRows("pin")
      const files: Files = { "README.md": "# r\n" }
      for (let i = 1; i < 100; i++) files[`tree/d${Math.floor(i / 50)}/f${i}.txt`] = `file ${i}\n`
      const base = buildCommit({ branch: "main", files })
      yield* storeCommit(repoId, orgId, base)
      yield* branchRow(repoId, "main", base.commit.hash)
      for (const name of ["warm", "settled", "pinned"]) {
        const built = buildCommit({ branch: name, files: { ...files, [`files/${name}.txt`]: `${name}\n` }, parent: base })
        yield* storeCommit(repoId, orgId, built)
        yield* branchRow(repoId, name, built.commit.hash)
      }
      // Each merge's event, as the relay publishes it.
      const relayed = new Map<string, Deferred.Deferred<Record<string, unknown>>>()
      const eventOf = (branch: string) => {
        const found = relayed.get(branch) ?? Deferred.makeUnsafe<Record<string, unknown>>()
        relayed.set(branch, found)
        return found
      }
      yield* bus.tail(Topics.events, (record) => {
        const value = record.value as { type?: unknown; branch?: unknown }
        return value.type === "merge" && typeof value.branch === "string" ? Deferred.succeed(eventOf(value.branch), value) : Effect.void
      })
      const mergeOnce = (branch: string) =>
        Effect.gen(function*() {
          const planned = yield* planMerge({ id: repoId, orgId }, branch, "t", false)
          const merged = yield* runtime.send(Repository, key, "Merge", mergePayload(planned, branch, "t"))
          expect(merged.merge_parent_hash).toBe(planned.branchHead)
          const event = yield* Deferred.await(eventOf(branch)).pipe(Effect.timeout(Duration.seconds(30)))
          // Published as the table holds it (the landing's statement adds the repository's fields).
          const sql = yield* SqlClient.SqlClient
          const [stored] = yield* sql<{ payload: unknown }>`SELECT payload FROM event_outbox WHERE event_id = ${event.id as string}::uuid`
          expect(event).toEqual(stored?.payload)
          expect(event).toMatchObject({ repository_id: repoId, owner: "pin", repo: "r", branch })
          return event
        })
      // The first merge prepares the statements; every partition's worker claims its partition (each claim
      // wakes the relay), and a second merge leaves the relay idle, with nothing pending.
      let before = traffic.statements.length
      yield* mergeOnce("warm")
      for (let waited = 0; runtime.health().claimed.length < 32; waited += 10) {
        if (waited > 30_000) return yield* Effect.die(new Error("the partitions were never all claimed"))
        yield* Effect.sleep(10)
      }
      before = traffic.statements.length
      yield* mergeOnce("settled")
      before = traffic.statements.length
      const pinned = yield* mergeOnce("pinned")
      // Up to the relayed event.
      const statements = traffic.statements.slice(before).filter((s) => !s.startsWith("SELECT payload FROM event_outbox WHERE event_id"))
      // The landing's statement returned its event row: the reply's does not read it back.
      expect(statements.filter((s) => s.startsWith("UPDATE command_inbox") && s.includes("event_outbox")), "the reply reads no event back").toEqual([])
      expect(statements.filter((s) => /^(SELECT .* FROM event_outbox|UPDATE event_outbox)/.test(s)), "the relay reads no event back").toEqual([])
      expect(statements.length, statements.map((s, i) => `${i + 1}. ${s.slice(0, 120)}`).join("\n")).toBe(EXPECTED)
      // The event's consumers (the CI trigger) read the squash commit's root tree through ContentObjects: the
      // landing kept the trees it built there, so that is no statement either (it was one per merge).
      const objects = yield* ContentObjects
      before = traffic.statements.length
      const roots = yield* objects.loadTrees(orgId, [pinned.tree as string])
      expect(roots.get(pinned.tree as string)?.map((e) => e.name)).toEqual(["README.md", "files", "tree"])
      expect(traffic.statements.slice(before)).toEqual([])
    }))
})
