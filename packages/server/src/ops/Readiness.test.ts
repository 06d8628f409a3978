import { describe, expect, it } from "@effect/vitest"
import type { EntityRuntime } from "@grove/bus"
import { commandSide, STUCK_AFTER_MS } from "./Readiness.ts"

const NOW = 1_000_000

const report = (over: Partial<EntityRuntime.RuntimeHealth> = {}): EntityRuntime.RuntimeHealth => ({
  host: true,
  bus: { reachable: true },
  group: { group: "g", topic: "grove.commands", joined: true, generation: 3, assigned: [1, 2] },
  claimed: [{ partition: 1, epoch: 4 }, { partition: 2, epoch: 7 }],
  stalled: [],
  dead: [],
  unserved: [],
  ...over
})

describe("commandSide", () => {
  it("a hosting node serving every partition it is given is ready, as a host", () => {
    expect(commandSide(report(), NOW)).toEqual({ ready: true, role: "host", partitions: [1, 2], stalled: [] })
  })

  it("a client-only node is ready as a client", () => {
    expect(commandSide(report({ host: false, group: undefined, claimed: [] }), NOW)).toMatchObject({ ready: true, role: "client" })
  })

  it("an unreachable bus fails the bus check, with the partitions it was given", () => {
    expect(commandSide(report({ bus: { reachable: false, error: "ECONNREFUSED" } }), NOW)).toEqual({
      ready: false,
      check: "bus",
      why: "the message bus cannot be reached (ECONNREFUSED)",
      busReachable: false,
      unserved: [1, 2]
    })
  })

  it("each partition problem fails the partitions check and says which", () => {
    const cases: Array<[Partial<EntityRuntime.RuntimeHealth>, string]> = [
      [{ group: { group: "g", topic: "t", joined: false, generation: 0, assigned: [], error: "kicked" } }, "not a member of the command partitions' group (kicked)"],
      [{ group: { group: "g", topic: "t", joined: true, generation: 1, assigned: [] } }, "owns no command partition right now"],
      [{ dead: [{ partition: 2, error: "boom" }] }, "no worker for partitions 2"],
      [{ unserved: [2] }, "partitions 2 are assigned here but not served yet"],
      [{ stalled: [{ partition: 1, since: NOW - STUCK_AFTER_MS, error: "db" }] }, "partitions 1 are stuck retrying"]
    ]
    for (const [over, why] of cases) {
      const side = commandSide(report(over), NOW)
      expect(side.ready).toBe(false)
      if (!side.ready) {
        expect(side.check).toBe("partitions")
        expect(side.why).toContain(why)
      }
    }
  })

  it("a partition retrying for less than the stuck bound keeps the node ready, and is listed", () => {
    const side = commandSide(report({ stalled: [{ partition: 1, since: NOW - 100, error: "db" }] }), NOW)
    expect(side).toMatchObject({ ready: true, stalled: [1] })
  })
})
