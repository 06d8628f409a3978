/**
 * Queries over many hashes, a slice at a time (`= ANY($slice)` with at most BATCH items), run unprepared
 * when the slice is large.
 *
 * Why unprepared: after a few runs a prepared statement switches to a generic plan, and the embedded
 * database (PGlite: no autovacuum, so no ANALYZE, so no replanning) keeps the one it made while the
 * tables were nearly empty. Such a plan joined 2,000 hashes against a 20,000-row table row by row
 * (10-45 s per batch of a 20k-file push); planned with the actual array and table sizes the same query
 * probes the index (tens of ms). Planning costs a fraction of a millisecond: noise next to a large batch,
 * but not next to the handful of hashes a merge or a read asks for, which stay prepared.
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { Statement } from "effect/sql/Statement"

export const BATCH = 2000

/** A statement over `items` values: unprepared when there are more than 100 (see above), else prepared. */
export const plannedFor = <A>(items: number, statement: Statement<A>): Effect.Effect<ReadonlyArray<A>, SqlError> =>
  items > 100 ? statement.unprepared : statement

/** The rows of the statement `f` builds for each slice of `items`, in order. */
export const inBatches = <A, B>(items: ReadonlyArray<A>, f: (slice: Array<A>) => Statement<B>) =>
  Effect.gen(function*() {
    const out: Array<B> = []
    for (let i = 0; i < items.length; i += BATCH) {
      const slice = items.slice(i, i + BATCH)
      out.push(...(yield* plannedFor(slice.length, f(slice))))
    }
    return out
  })

/**
 * Rows in hash order, for the inserts that take row locks (ON CONFLICT): two pushes writing overlapping rows in
 * opposite orders deadlock on PostgreSQL (40P01, one push fails); in one order, the second waits for the first.
 */
export const byHash = <A>(rows: ReadonlyArray<A>, hash: (row: A) => string): Array<A> =>
  [...rows].sort((a, b) => hash(a) < hash(b) ? -1 : hash(a) > hash(b) ? 1 : 0)
