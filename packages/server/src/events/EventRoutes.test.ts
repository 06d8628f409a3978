/**
 * The frames of one `…/events` connection: the wanted events as `event: branch`, one `event: lag`
 * where the node's sequence jumps (events dropped while the connection lagged), wanted or not; access
 * re-checked at access events, gaps and periodic ticks, the stream closed with `event: closed` when
 * it fails. And the slots that cap open streams per caller and per node.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { type CloseReason, framesOf, type StreamInput } from "./EventRoutes.ts"
import type { RepositoryEvent } from "./RepositoryEvent.ts"
import { StreamSlots } from "./StreamSlots.ts"

const event = (id: string, repository_id: string, branch: string): RepositoryEvent => ({
  type: "push",
  id,
  repository_id,
  branch,
  commit: "c".repeat(64),
  pusher: "ana",
  timestamp: "2026-11-25T00:00:00.000Z"
})

/** The frames for `inputs`, cut after `closed` as the route cuts them; `verdicts` answer the re-checks in turn. */
const frames = (inputs: ReadonlyArray<StreamInput>, verdicts: ReadonlyArray<CloseReason | undefined> = []) =>
  Effect.gen(function*() {
    let checks = 0
    const recheck = Effect.sync(() => verdicts[checks++])
    const out = yield* Stream.fromIterable(inputs).pipe(
      framesOf((e) => e.repository_id === "r1", recheck),
      Stream.takeUntil((frame) => frame.startsWith("event: closed\n")),
      Stream.runCollect
    )
    return { out: [...out], checks }
  })

const names = (out: ReadonlyArray<string>) => out.map((frame) => frame.split("\n")[0])

it.effect("a contiguous sequence gives the wanted events only, as branch frames, without re-checking access", () =>
  Effect.gen(function*() {
    const { out, checks } = yield* frames([
      { seq: 1, event: event("a", "r1", "main") },
      { seq: 2, event: event("b", "r2", "main") },
      { seq: 3, event: event("c", "r1", "topic") }
    ])
    expect(out).toHaveLength(2)
    expect(checks).toBe(0)
    expect(out[0]).toMatch(/^event: branch\ndata: \{"kind":"push","branch":"main","commit":"c{64}","actor":"ana",/)
    expect(JSON.parse(out[1]!.split("data: ")[1]!)).toMatchObject({ kind: "push", branch: "topic" })
  }))

it.effect("a gap in the sequence answers one lag frame before what follows, also when the next event is another repository's", () =>
  Effect.gen(function*() {
    const { out, checks } = yield* frames([
      { seq: 5, event: event("a", "r1", "main") },
      { seq: 9, event: event("b", "r2", "main") },
      { seq: 10, event: event("c", "r1", "main") },
      { seq: 12, event: event("d", "r1", "main") }
    ])
    expect(names(out)).toEqual(["event: branch", "event: lag", "event: branch", "event: lag", "event: branch"])
    expect(out[1]).toBe("event: lag\ndata: {}\n\n")
    // An access event may have been among those dropped: each gap re-checks.
    expect(checks).toBe(2)
  }))

it.effect("an access event re-checks; a refusal closes the stream before the events after it", () =>
  Effect.gen(function*() {
    const { out, checks } = yield* frames([
      { seq: 1, event: event("a", "r1", "main") },
      { seq: 2, access: "organization.member_added" },
      { seq: 3, event: event("b", "r1", "main") },
      { seq: 4, access: "repository.visibility_changed" },
      { seq: 5, event: event("c", "r1", "leak") }
    ], [undefined, "access_revoked"])
    expect(checks).toBe(2)
    expect(names(out)).toEqual(["event: branch", "event: branch", "event: closed"])
    expect(JSON.parse(out[2]!.split("data: ")[1]!)).toMatchObject({ reason: "access_revoked" })
    expect(out.join("")).not.toContain("leak")
  }))

it.effect("a periodic tick re-checks (a key that expired); pings pass through", () =>
  Effect.gen(function*() {
    const { out, checks } = yield* frames([
      { tick: "ping" },
      { tick: "recheck" },
      { seq: 1, event: event("a", "r1", "main") },
      { tick: "recheck" },
      { seq: 2, event: event("b", "r1", "main") }
    ], [undefined, "key_revoked"])
    expect(checks).toBe(2)
    expect(names(out)).toEqual(["event: ping", "event: branch", "event: closed"])
    expect(JSON.parse(out[2]!.split("data: ")[1]!)).toMatchObject({ reason: "key_revoked" })
  }))

it("caps streams per caller and per node, and gives slots back", () => {
  const slots = new StreamSlots({ perCaller: 2, perNode: 3 })
  expect(slots.take("a")).toBe(true)
  expect(slots.take("a")).toBe(true)
  expect(slots.take("a")).toBe(false)
  expect(slots.take("b")).toBe(true)
  // The node is full: another caller is refused too.
  expect(slots.take("c")).toBe(false)
  expect([slots.open("a"), slots.open("b"), slots.open("c"), slots.open()]).toEqual([2, 1, 0, 3])
  slots.give("a")
  expect(slots.take("c")).toBe(true)
  slots.give("c")
  slots.give("c")
  expect(slots.open()).toBe(2)
  expect(slots.open("c")).toBe(0)
})
