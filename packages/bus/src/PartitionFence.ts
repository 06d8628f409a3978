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

/** Inside a command transaction: fails with `Fenced` unless `epoch` is still current. */
export const check = Effect.fnUntraced(function*(topic: string, partition: number, epoch: number, offset: bigint) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`
    UPDATE partition_epochs SET committed_offset = GREATEST(committed_offset, ${offset})
    WHERE topic = ${topic} AND partition = ${partition} AND epoch = ${epoch}
    RETURNING epoch`
  if (rows.length === 0) return yield* new Fenced({ topic, partition, epoch })
})
