/**
 * Step logs: the runner writes each step's output in pieces while it runs, every piece an object
 * in the object store (namespace `ci-<organization>`, keyed by its SHA-256) indexed by a
 * `ci_log_chunks` row, so any node reads a run's logs, complete or still growing, in write order.
 */
import { ObjectStore } from "@grove/storage"
import { Context, Effect, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"

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
}>()("grove/server/ci/CiLogStore") {
  static readonly layer = Layer.effect(CiLogStore, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const store = yield* ObjectStore.ObjectStore
    const read = (orgId: string, hash: string) =>
      Effect.gen(function*() {
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
    return CiLogStore.of({
      append: Effect.fnUntraced(function*(orgId, runId, stepId, seq, text) {
        const bytes = Buffer.from(text, "utf8")
        const hash = createHash("sha256").update(bytes).digest("hex")
        yield* store.put({ namespace: namespace(orgId), hash }, Stream.make(new Uint8Array(bytes)))
        yield* sql`INSERT INTO ci_log_chunks ${sql.insert({ run_id: runId, step_id: stepId, seq, object_hash: hash, bytes: bytes.length })}
          ON CONFLICT (run_id, step_id, seq) DO NOTHING`
      }),
      after,
      byStep: Effect.fnUntraced(function*(orgId, runId) {
        const out = new Map<number, string>()
        let last = 0
        for (;;) {
          const pieces = yield* after(orgId, runId, last)
          for (const piece of pieces) out.set(piece.stepId, (out.get(piece.stepId) ?? "") + piece.text)
          if (pieces.length < 1000) return out
          last = pieces[pieces.length - 1]!.id
        }
      })
    })
  }))
}
