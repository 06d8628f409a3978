/**
 * Background offset commits, shared by both buses: workers mark what they
 * have processed, and the latest mark per partition is committed every
 * interval and when the partition is revoked. A node that dies loses its
 * latest marks, so the next owner sees those records again (the inbox makes
 * that harmless); the database holds the authoritative offsets.
 */
import { Duration, Effect, Schedule } from "effect"
import type { Scope } from "effect"

export interface Committer<Meta> {
  /** Records that everything before `next` in `partition` is processed. */
  readonly mark: (partition: number, next: bigint, meta: Meta) => void
  /** Commits the marks of `partitions` now (all when omitted). */
  readonly flush: (partitions?: Iterable<number>) => Effect.Effect<void>
}

export const make = <Meta>(
  commit: (marks: ReadonlyArray<{ readonly partition: number; readonly next: bigint; readonly meta: Meta }>) => Effect.Effect<void>,
  interval: Duration.Input
): Effect.Effect<Committer<Meta>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const pending = new Map<number, { readonly next: bigint; readonly meta: Meta }>()

    const flush = (partitions?: Iterable<number>) =>
      Effect.suspend(() => {
        const marks: Array<{ readonly partition: number; readonly next: bigint; readonly meta: Meta }> = []
        for (const partition of partitions ?? [...pending.keys()]) {
          const mark = pending.get(partition)
          if (mark === undefined) continue
          pending.delete(partition)
          marks.push({ partition, ...mark })
        }
        return marks.length === 0 ? Effect.void : commit(marks)
      })

    yield* Effect.forkScoped(flush().pipe(Effect.repeat(Schedule.spaced(Duration.fromInputUnsafe(interval)))))

    return {
      mark: (partition, next, meta) => {
        const current = pending.get(partition)
        if (current === undefined || current.next < next) pending.set(partition, { next, meta })
      },
      flush
    }
  })
