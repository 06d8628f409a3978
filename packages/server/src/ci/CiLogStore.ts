/**
 * Step logs: the runner writes each step's output in pieces while it runs, every piece an object
 * in the object store (namespace `ci-<organization>`, keyed by its SHA-256) indexed by a
 * `ci_log_chunks` row, so any node reads a run's logs, complete or still growing, in write order.
 *
 * Followers are woken, not polling: an append (or a runner's `notify` of a state change) completes
 * the run's ticket on this node, and in cluster mode a `pg_notify` on `CHANNEL` wakes the other
 * nodes, which LISTEN. A follower takes its ticket before it reads, so an append between its read
 * and its wait still wakes it.
 */
import { PgClient } from "@effect/sql-pg"
import { ObjectStore } from "@grove/storage"
import { Cause, Context, Deferred, Effect, Exit, Layer, Option, Queue, Schedule, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import { ServerConfig } from "../Config.ts"

/** How many recently appended pieces this node keeps in memory for its followers. */
const RECENT_PIECES = 256

/** The PostgreSQL channel of "run N's log or state changed" (payload: the run id). */
export const CHANNEL = "grove_ci_log"

export interface LogPiece {
  /** Increases in write order across the run: a follower asks for pieces after the last it saw. */
  readonly id: number
  readonly stepId: number
  readonly text: string
}

const namespace = (orgId: string) => `ci-${orgId}`

export class CiLogStore extends Context.Service<CiLogStore, {
  readonly append: (orgId: string, runId: number, stepId: number, seq: number, text: string) => Effect.Effect<void, unknown>
  /** Pieces after `afterId` (0: from the start), at most `limit`. */
  readonly after: (orgId: string, runId: number, afterId: number, limit?: number) => Effect.Effect<ReadonlyArray<LogPiece>, unknown>
  /** Every step's whole log so far. */
  readonly byStep: (orgId: string, runId: number) => Effect.Effect<Map<number, string>, unknown>
  /** The same, with the id of the last piece read (a follower continues after it). */
  readonly snapshot: (orgId: string, runId: number) => Effect.Effect<{ readonly byStep: Map<number, string>; readonly lastId: number }, unknown>
  /** Completes at the next append or `notify` of the run after this call (take it before reading). */
  readonly ticket: (runId: number) => Effect.Effect<void>
  /** The run's state changed (a runner's report): wakes its followers on every node. */
  readonly notify: (runId: number) => Effect.Effect<void>
}>()("grove/server/ci/CiLogStore") {
  static readonly layer = Layer.effect(CiLogStore, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const store = yield* ObjectStore.ObjectStore
    const waiters = new Map<number, Deferred.Deferred<void>>()
    const wake = (runId: number) => {
      const waiter = waiters.get(runId)
      if (waiter === undefined) return
      waiters.delete(runId)
      Deferred.doneUnsafe(waiter, Exit.void)
    }
    const ticket = (runId: number) => {
      let waiter = waiters.get(runId)
      if (waiter === undefined) {
        waiter = Deferred.makeUnsafe<void>()
        waiters.set(runId, waiter)
      }
      return Deferred.await(waiter)
    }
    // Cluster mode: the other nodes' appends and reports, through PostgreSQL. Embedded mode has one process (and
    // one database connection, which a LISTEN would hold for good).
    const pg = (yield* ServerConfig).mode === "cluster" ? yield* Effect.serviceOption(PgClient.PgClient) : Option.none()
    if (Option.isSome(pg)) {
      yield* Effect.gen(function*() {
        const notifications = yield* pg.value.listen(CHANNEL)
        yield* Queue.take(notifications).pipe(Effect.map((notification) => wake(Number(notification.payload))), Effect.forever)
      }).pipe(
        Effect.scoped,
        Effect.tapCause((cause) => Effect.logWarning("not listening for CI log changes; followers on this node poll", Cause.squash(cause))),
        Effect.retry(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
    }
    const notify = (runId: number) =>
      Effect.sync(() => wake(runId)).pipe(
        Effect.andThen(Option.isSome(pg) ? pg.value.notify(CHANNEL, String(runId)).pipe(Effect.ignore) : Effect.void)
      )
    // The pieces appended on this node lately: a follower here reads a fresh piece without the object store.
    const recent = new Map<string, string>()
    const remember = (key: string, text: string) => {
      recent.set(key, text)
      if (recent.size > RECENT_PIECES) recent.delete(recent.keys().next().value!)
    }
    const read = (orgId: string, hash: string) =>
      recent.has(`${orgId}/${hash}`) ? Effect.succeed(recent.get(`${orgId}/${hash}`)!) : Effect.gen(function*() {
        const parts: Array<Uint8Array> = []
        yield* Stream.runForEach(store.get({ namespace: namespace(orgId), hash }), (part) => Effect.sync(() => parts.push(part)))
        return Buffer.concat(parts).toString("utf8")
      })
    // Ordered by the column (`ci_log_chunks.id`): the text alias `id` would put piece 10 before piece 9.
    const after = Effect.fnUntraced(function*(orgId: string, runId: number, afterId: number, limit = 1000) {
      const rows = yield* sql<{ id: string; step_id: number; object_hash: string }>`SELECT id::int8::text AS id, step_id, object_hash
        FROM ci_log_chunks WHERE run_id = ${runId} AND id > ${afterId} ORDER BY ci_log_chunks.id LIMIT ${limit}`
      return yield* Effect.forEach(rows, (row) =>
        Effect.map(read(orgId, row.object_hash), (text): LogPiece => ({ id: Number(row.id), stepId: row.step_id, text })), { concurrency: 8 })
    })
    const snapshot = Effect.fnUntraced(function*(orgId: string, runId: number) {
      const byStep = new Map<number, string>()
      let lastId = 0
      for (;;) {
        const pieces = yield* after(orgId, runId, lastId)
        for (const piece of pieces) byStep.set(piece.stepId, (byStep.get(piece.stepId) ?? "") + piece.text)
        if (pieces.length > 0) lastId = pieces[pieces.length - 1]!.id
        if (pieces.length < 1000) return { byStep, lastId }
      }
    })
    return CiLogStore.of({
      append: Effect.fnUntraced(function*(orgId, runId, stepId, seq, text) {
        const bytes = Buffer.from(text, "utf8")
        const hash = createHash("sha256").update(bytes).digest("hex")
        yield* store.put({ namespace: namespace(orgId), hash }, Stream.make(new Uint8Array(bytes)))
        remember(`${orgId}/${hash}`, text)
        yield* sql`INSERT INTO ci_log_chunks ${sql.insert({ run_id: runId, step_id: stepId, seq, object_hash: hash, bytes: bytes.length })}
          ON CONFLICT (run_id, step_id, seq) DO NOTHING`
        yield* notify(runId)
      }),
      after,
      ticket,
      notify,
      byStep: (orgId, runId) => Effect.map(snapshot(orgId, runId), (s) => s.byStep),
      snapshot
    })
  }))
}
