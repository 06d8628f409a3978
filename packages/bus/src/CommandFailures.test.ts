import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration } from "effect"
import { SqlError } from "effect/sql/SqlError"
import * as SqlErrors from "effect/sql/SqlError"
import { backoff, classify } from "./CommandFailures.ts"
import { Fenced } from "./PartitionFence.ts"

const sqlError = (reason: SqlErrors.SqlError["reason"]) => new SqlError({ reason })
const connection = sqlError(new SqlErrors.ConnectionError({ cause: new Error("Connection closed"), message: "Connection closed" }))
const serialization = sqlError(new SqlErrors.SerializationError({ cause: new Error("could not serialize") }))
const nul = sqlError(new SqlErrors.UnknownError({ cause: new Error("invalid byte sequence for encoding \"UTF8\": 0x00"), message: "Query failed" }))

const shutdown = sqlError(new SqlErrors.UnknownError({
  cause: Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }),
  message: "Query failed"
}))
const startingUp = sqlError(new SqlErrors.UnknownError({
  cause: Object.assign(new Error("the database system is starting up"), { code: "57P03" }),
  message: "Failed to connect"
}))

describe("CommandFailures.classify", () => {
  const table: ReadonlyArray<readonly [string, Cause.Cause<unknown>, string]> = [
    ["a lost connection", Cause.fail(connection), "Transient"],
    ["a lost connection surfacing as a defect (failed ROLLBACK)", Cause.die(connection), "Transient"],
    ["a serialization failure", Cause.fail(serialization), "Transient"],
    ["text PostgreSQL cannot store", Cause.fail(nul), "Poison"],
    ["PostgreSQL shutting down (57P01, reported as UnknownError)", Cause.fail(shutdown), "Transient"],
    ["PostgreSQL starting up (57P03)", Cause.die(startingUp), "Transient"],
    ["a defect", Cause.die(new Error("boom")), "Poison"],
    ["a fence that moved", Cause.fail(new Fenced({ topic: "t", partition: 1, epoch: 2 })), "Fenced"],
    ["an interruption", Cause.interrupt(), "Interrupted"]
  ]
  for (const [what, cause, verdict] of table) {
    it(what, () => assert.strictEqual(classify(cause)._tag, verdict))
  }

  it("tells a lost connection from other transient errors, and names the driver's reason", () => {
    const lost = classify(Cause.die(connection))
    assert.isTrue(lost._tag === "Transient" && lost.connection)
    const down = classify(Cause.fail(shutdown))
    assert.isTrue(down._tag === "Transient" && down.connection)
    const busy = classify(Cause.fail(serialization))
    assert.isTrue(busy._tag === "Transient" && !busy.connection)
    const poison = classify(Cause.fail(nul))
    assert.isTrue(poison._tag === "Poison" && poison.message.includes("0x00"))
  })

  it("backs off from 50 ms to at most 1 s", () => {
    assert.strictEqual(Duration.toMillis(backoff(0)), 50)
    assert.strictEqual(Duration.toMillis(backoff(3)), 400)
    assert.strictEqual(Duration.toMillis(backoff(50)), 1000)
  })
})
