/**
 * How many event streams are open on this node, in all and per caller (a user, a service account,
 * or an anonymous client's address), so that one caller cannot hold the node's connections.
 */
export interface StreamLimits {
  readonly perCaller: number
  readonly perNode: number
}

export class StreamSlots {
  private readonly byCaller = new Map<string, number>()
  private total = 0
  private readonly limits: StreamLimits

  constructor(limits: StreamLimits) {
    this.limits = limits
  }

  /** Takes a slot for `caller`; false (nothing taken) past either cap. */
  take(caller: string): boolean {
    const held = this.byCaller.get(caller) ?? 0
    if (held >= this.limits.perCaller || this.total >= this.limits.perNode) return false
    this.byCaller.set(caller, held + 1)
    this.total++
    return true
  }

  /** Gives back a slot `take` gave. */
  give(caller: string): void {
    const held = this.byCaller.get(caller) ?? 0
    if (held <= 0) return
    if (held === 1) this.byCaller.delete(caller)
    else this.byCaller.set(caller, held - 1)
    this.total--
  }

  /** Open streams: of `caller`, or on the node. */
  open(caller?: string): number {
    return caller === undefined ? this.total : this.byCaller.get(caller) ?? 0
  }
}
