/**
 * The entity the contract suite drives. Every application of a command is a
 * row in `bus_test_applied` (with the node, partition and epoch that applied
 * it), so the suite can count applications per command id and check who
 * wrote what, in which order.
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Entity from "../../src/Entity.ts"
import { EntityRuntime } from "../../src/EntityRuntime.ts"
import { Outbox } from "../../src/Outbox.ts"

export class TestRejected extends Schema.TaggedError<TestRejected>()("TestRejected", {
  reason: Schema.String
}) {}

export const Applied = Schema.Struct({ seq: Schema.Int, node: Schema.String, partition: Schema.Int, epoch: Schema.Int })

export const TestEntity = Entity.make("ContractTest", {
  Apply: {
    payload: Schema.Struct({ seq: Schema.Int, sleepMs: Schema.optionalKey(Schema.Int) }),
    success: Applied
  },
  /** Writes a row, then fails: the row must be rolled back and the error stored. */
  Reject: { payload: Schema.Struct({ reason: Schema.String }), success: Schema.Void, error: TestRejected },
  Crash: { payload: Schema.Struct({}), success: Schema.Void },
  Emit: { payload: Schema.Struct({ count: Schema.Int }), success: Schema.Array(Schema.String) },
  /** Applies, then answers text PostgreSQL cannot store as the reply: the command fails the same way every time. */
  Unstorable: { payload: Schema.Struct({ seq: Schema.Int }), success: Schema.String }
})

export const createTables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS bus_test_applied (
    id bigserial PRIMARY KEY,
    command_id text NOT NULL,
    entity_id text NOT NULL,
    seq integer NOT NULL,
    partition integer NOT NULL,
    epoch integer NOT NULL,
    node_id text NOT NULL
  )`
})

const record = (context: Entity.CommandContext, seq: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO bus_test_applied (command_id, entity_id, seq, partition, epoch, node_id)
      VALUES (${context.commandId}, ${context.entityId}, ${seq}, ${context.partition}, ${context.epoch}, ${context.nodeId})`
  })

export const handlers: Entity.Handlers<typeof TestEntity> = {
  Apply: (payload, context) =>
    Effect.gen(function*() {
      if (payload.sleepMs !== undefined) yield* Effect.sleep(payload.sleepMs)
      yield* record(context, payload.seq)
      return { seq: payload.seq, node: context.nodeId, partition: context.partition, epoch: context.epoch }
    }),
  Reject: (payload, context) =>
    record(context, -1).pipe(Effect.andThen(Effect.fail(new TestRejected({ reason: payload.reason })))),
  Crash: () => Effect.die(new Error("the handler crashed")),
  Unstorable: (payload, context) => Effect.as(record(context, payload.seq), "nul \u0000 in the reply"),
  Emit: (payload, context) =>
    Effect.gen(function*() {
      const outbox = yield* Outbox
      const ids: Array<string> = []
      for (let n = 0; n < payload.count; n++) {
        ids.push(yield* outbox.append({ type: "contract-test.emitted", v: 1, entityId: context.entityId, n }))
      }
      return ids
    })
}

export const TestHandlers = EntityRuntime.register(TestEntity, handlers)
