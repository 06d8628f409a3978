/**
 * The frames of one `…/events` connection: the wanted events as `event: branch`, and one `event: lag`
 * where the node's sequence jumps (events dropped while the connection lagged), wanted or not.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { framesOf } from "./EventRoutes.ts"
import type { RepositoryEvent } from "./RepositoryEvent.ts"
import type { SequencedEvent } from "./RepositoryEventStream.ts"

const event = (id: string, repository_id: string, branch: string): RepositoryEvent => ({
  type: "push",
  id,
  repository_id,
  branch,
  commit: "c".repeat(64),
  pusher: "ana",
  timestamp: "2026-11-25T00:00:00.000Z"
})

const frames = (events: ReadonlyArray<SequencedEvent>) =>
  Stream.fromIterable(events).pipe(framesOf((e) => e.repository_id === "r1"), Stream.runCollect, Effect.map((all) => [...all]))

it.effect("a contiguous sequence gives the wanted events only, as branch frames", () =>
  Effect.gen(function*() {
    const out = yield* frames([
      { seq: 1, event: event("a", "r1", "main") },
      { seq: 2, event: event("b", "r2", "main") },
      { seq: 3, event: event("c", "r1", "topic") }
    ])
    expect(out).toHaveLength(2)
    expect(out[0]).toMatch(/^event: branch\ndata: \{"kind":"push","branch":"main","commit":"c{64}","actor":"ana",/)
    expect(JSON.parse(out[1]!.split("data: ")[1]!)).toMatchObject({ kind: "push", branch: "topic" })
  }))

it.effect("a gap in the sequence answers one lag frame before what follows, also when the next event is another repository's", () =>
  Effect.gen(function*() {
    const out = yield* frames([
      { seq: 5, event: event("a", "r1", "main") },
      { seq: 9, event: event("b", "r2", "main") },
      { seq: 10, event: event("c", "r1", "main") },
      { seq: 12, event: event("d", "r1", "main") }
    ])
    expect(out.map((frame) => frame.split("\n")[0])).toEqual(["event: branch", "event: lag", "event: branch", "event: lag", "event: branch"])
    expect(out[1]).toBe("event: lag\ndata: {}\n\n")
  }))
