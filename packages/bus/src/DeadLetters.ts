/**
 * The dead-letter topic's side of a command partition's worker: a record that cannot be decoded or settled is
 * set aside there with the reason (and the record itself, up to a size), so it never holds the partition.
 */
import { Effect, Schedule } from "effect"
import type { BusRecord, BusShape } from "./Bus.ts"
import type { DeadLetter } from "./Messages.ts"
import type { PartitionHealth } from "./PartitionHealth.ts"
import * as Topics from "./Topics.ts"

/** A record's value is kept in its dead letter up to this much JSON. */
const DEAD_LETTER_VALUE_LIMIT = 64 * 1024

/** Sets a record of `topic`'s `partition` aside on the dead-letter topic, with the reason; waits until the bus has it. */
export const deadLetters = (options: { readonly bus: BusShape; readonly health: PartitionHealth; readonly topic: string; readonly partition: number }) => {
  const { bus, health, topic, partition } = options
  return (record: BusRecord, reason: string) =>
    Effect.gen(function*() {
      const json = JSON.stringify(record.value) ?? ""
      const letter: DeadLetter = {
        type: "grove.dead-letter",
        v: 1,
        topic,
        partition,
        offset: String(record.offset),
        key: record.key,
        reason,
        headers: record.headers,
        ...(json.length <= DEAD_LETTER_VALUE_LIMIT ? { record: record.value } : {})
      }
      yield* Effect.logError("dead-lettered a command record", { offset: String(record.offset), reason })
      // The bus is this worker's own source: while it cannot take the letter, nothing else moves here either.
      yield* bus.publish([{ topic: Topics.deadLetters, key: record.key, value: letter }]).pipe(
        Effect.tapError((error) => Effect.sync(() => health.stalled(partition, error.message))),
        Effect.retry({ schedule: Schedule.min([Schedule.exponential("50 millis"), Schedule.spaced("1 second")]) }),
        Effect.orDie, // the schedule never ends
        Effect.ensuring(Effect.sync(() => health.recovered(partition)))
      )
    })
}
