/**
 * How a function's cost grows, for the "grows near-linearly" tests of this package. Not a timed test: a small and a
 * large input are measured in turns in the same run and compared. The measure is this thread's CPU time, not the wall
 * clock, so a loaded machine that preempts the test (CI ran it at load 15 on 2 cores, and a 19 ms run took 277 ms of
 * wall time) does not decide the comparison; the fastest of several rounds leaves out a GC pause or a JIT tier-up.
 */
const threadCpuMs = (): number => {
  const { system, user } = process.threadCpuUsage()
  return (user + system) / 1000
}

export interface Growth<A> {
  /** The fastest round of the small input, in milliseconds of this thread's CPU. */
  readonly small: number
  /** The fastest round of the large input, in milliseconds of this thread's CPU. */
  readonly large: number
  /** What the last round of the large input returned. */
  readonly result: A
}

/** Runs `small` and `large` in turns, `rounds` times, and keeps the fastest CPU time of each. */
export const growth = <A>(small: () => unknown, large: () => A, rounds = 5): Growth<A> => {
  let smallBest = Infinity
  let largeBest = Infinity
  let result: A | undefined
  for (let round = 0; round < rounds; round++) {
    const s0 = threadCpuMs()
    small()
    const s1 = threadCpuMs()
    result = large()
    const l1 = threadCpuMs()
    smallBest = Math.min(smallBest, s1 - s0)
    largeBest = Math.min(largeBest, l1 - s1)
  }
  return { small: smallBest, large: largeBest, result: result as A }
}
