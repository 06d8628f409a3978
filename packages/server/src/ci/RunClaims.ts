/**
 * This node's bookkeeping of the runs its runners take: a run whose Start this node sent and whose outcome it
 * still follows is not claimed again (a second Start, pending too, would hold a second runner and could run it
 * twice); a run executed here is not executed again until its row left `running` on this node (its Finish may
 * still be pending after the runner ended).
 */
export interface RunClaims {
  /** Whether `runId` may be claimed: no Start of it followed here, not executed here with its row still running. */
  readonly claimable: (runId: number) => boolean
  /** Marks a Start of `runId` as sent (false: one is already followed; send none). */
  readonly follow: (runId: number) => boolean
  /** The Start's outcome is known (or it can no longer apply). */
  readonly settled: (runId: number) => void
  /** Marks `runId` as executing here (false: it executes, or executed and may still be recorded running, here). */
  readonly execute: (runId: number) => boolean
  /** Its row left `running` on this node. */
  readonly left: (runId: number) => void
}

export const make = (): RunClaims => {
  const following = new Set<number>()
  const executed = new Set<number>()
  return {
    claimable: (runId) => !following.has(runId) && !executed.has(runId),
    follow: (runId) => {
      if (following.has(runId)) return false
      following.add(runId)
      return true
    },
    settled: (runId) => {
      following.delete(runId)
    },
    execute: (runId) => {
      if (executed.has(runId)) return false
      executed.add(runId)
      return true
    },
    left: (runId) => {
      executed.delete(runId)
    }
  }
}
