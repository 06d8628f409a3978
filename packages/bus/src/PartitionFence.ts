/**
 * The per-partition epoch fence. A node that is given a partition claims it
 * by bumping its epoch; every command transaction first checks that the
 * epoch is still its own (and records the offset it consumed), so a stale
 * owner after a rebalance cannot commit anything: its transaction aborts and
 * it drops the partition. The check's row lock also orders a stale owner's
 * in-flight transaction against the new owner's claim.
 */
import { Data, Effect } from "effect"
import { SqlClient } from "effect/sql"

export class Fenced extends Data.TaggedError("Fenced")<{
  readonly topic: string
  readonly partition: number
  readonly epoch: number
}> {}

/** Takes the partition over: returns this node's new epoch. */
export const claim = Effect.fnUntraced(function*(topic: string, partition: number, owner: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly epoch: number }>`
    INSERT INTO partition_epochs (topic, partition, epoch, owner) VALUES (${topic}, ${partition}, 1, ${owner})
    ON CONFLICT (topic, partition) DO UPDATE
      SET epoch = partition_epochs.epoch + 1, owner = excluded.owner, claimed_at = now()
    RETURNING epoch`
  return rows[0]!.epoch
})

/** What a command transaction checks: its partition's epoch, and the offset of the record it handles. */
export interface FenceCheck {
  readonly topic: string
  readonly partition: number
  readonly epoch: number
  readonly offset: bigint
}

/**
 * The check's statement: records the offset and returns a row only while `epoch` is current (its row
 * lock orders this transaction against a claim). A fragment, for a caller that folds it into a statement
 * of its own (`Inbox.begin`: one round trip for the fence and the command's inbox row).
 */
export const advance = (sql: SqlClient.SqlClient, fence: FenceCheck) =>
  sql`UPDATE partition_epochs SET committed_offset = GREATEST(committed_offset, ${fence.offset})
    WHERE topic = ${fence.topic} AND partition = ${fence.partition} AND epoch = ${fence.epoch}
    RETURNING epoch`

/** Inside a command transaction: fails with `Fenced` unless `epoch` is still current. */
export const check = Effect.fnUntraced(function*(topic: string, partition: number, epoch: number, offset: bigint) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* advance(sql, { topic, partition, epoch, offset })
  if (rows.length === 0) return yield* new Fenced({ topic, partition, epoch })
})
