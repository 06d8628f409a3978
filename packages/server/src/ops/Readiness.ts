/**
 * Whether this node can serve, from what its entity runtime reports: the one reading of the bus and
 * partition state, shared by `/api/health` (system/SystemHandlers.ts) and `/readyz` (ops/OpsRoutes.ts).
 */
import type { EntityRuntime } from "@grove/bus"

/** A partition retrying this long (the database or the bus is away) makes the node unready. */
export const STUCK_AFTER_MS = 5_000

export type CommandSide =
  | {
    readonly ready: true
    readonly role: "host" | "client"
    readonly partitions: ReadonlyArray<number>
    readonly stalled: ReadonlyArray<number>
  }
  | {
    readonly ready: false
    /** Which check failed: the bus, or the partitions. */
    readonly check: "bus" | "partitions"
    readonly why: string
    readonly busReachable: boolean
    readonly unserved: ReadonlyArray<number>
  }

export const commandSide = (report: EntityRuntime.RuntimeHealth, now: number = Date.now()): CommandSide => {
  const { dead, group, stalled, unserved } = report
  const notReady = (check: "bus" | "partitions", why: string, busReachable: boolean, unservedNow: ReadonlyArray<number>): CommandSide => ({
    ready: false,
    check,
    why,
    busReachable,
    unserved: unservedNow
  })
  if (!report.bus.reachable) {
    return notReady("bus", `the message bus cannot be reached (${report.bus.error ?? "no answer"})`, false, group?.assigned ?? [])
  }
  if (report.host && (group === undefined || !group.joined)) {
    return notReady("partitions", `not a member of the command partitions' group (${group?.error ?? "not joined"}); rejoining`, true, [])
  }
  // A hosting node the group gives nothing is mid-rebalance (32 partitions, fewer nodes): it serves nothing yet.
  if (report.host && group !== undefined && group.assigned.length === 0) {
    return notReady("partitions", "this node owns no command partition right now (a rebalance is under way)", true, [])
  }
  if (dead.length > 0) {
    return notReady("partitions", `no worker for partitions ${dead.map((d) => d.partition).join(", ")}`, true, unserved)
  }
  if (unserved.length > 0) {
    return notReady("partitions", `partitions ${unserved.join(", ")} are assigned here but not served yet`, true, unserved)
  }
  const stuck = stalled.filter((stall) => now - stall.since >= STUCK_AFTER_MS)
  if (stuck.length > 0) {
    return notReady("partitions", `partitions ${stuck.map((s) => s.partition).join(", ")} are stuck retrying`, true, [])
  }
  return {
    ready: true,
    // A client-only node (it hosts no partitions) is ready as a client: it sends writes, it serves none.
    role: report.host ? "host" : "client",
    partitions: report.claimed.map((claim) => claim.partition),
    stalled: stalled.map((s) => s.partition)
  }
}
