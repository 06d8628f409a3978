import { MultipleErrors, NetworkError, ProtocolError } from "@platformatic/kafka"
import { assert, describe, it } from "@effect/vitest"
import { groupInMotion } from "./KafkaMember.ts"

describe("KafkaMember", () => {
  it("tries a first join again only when the group was in motion, not when the broker is away", () => {
    // As @platformatic/kafka fails a join it retried: its attempts' errors, nested.
    const failedJoin = (...errors: ReadonlyArray<Error>) => new MultipleErrors("joinGroup failed 4 times.", [...errors])
    assert.isTrue(groupInMotion(failedJoin(new ProtocolError("REBALANCE_IN_PROGRESS"), new ProtocolError("REBALANCE_IN_PROGRESS"))))
    assert.isTrue(groupInMotion(failedJoin(new MultipleErrors("nested", [new ProtocolError("COORDINATOR_LOAD_IN_PROGRESS")]))))
    assert.isTrue(groupInMotion(new ProtocolError("NOT_COORDINATOR")))
    assert.isFalse(groupInMotion(failedJoin(new NetworkError("Connection to 127.0.0.1:9 failed."))))
    assert.isFalse(groupInMotion(new ProtocolError("GROUP_AUTHORIZATION_FAILED")))
    assert.isFalse(groupInMotion(undefined))
  })
})
