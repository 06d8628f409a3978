/**
 * Line diff: Myers' O(ND) algorithm in its linear-space form (bisect on the middle snake), the
 * base of the text merge and of `grove diff`. Lines keep their terminators, so CRLF and a missing
 * final newline survive a merge byte for byte.
 */

/** Lines with their `\n` kept (a `\r` before it stays part of the line); the last may lack one. "" has no lines. */
export const splitLines = (text: string): Array<string> => {
  const lines: Array<string> = []
  let start = 0
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", start)) {
    lines.push(text.slice(start, i + 1))
    start = i + 1
  }
  if (start < text.length) lines.push(text.slice(start))
  return lines
}

/**
 * A longest common subsequence of `a` and `b`: for each line of `a`, the index of the line of `b`
 * it is matched with, or -1. Matches increase strictly in both sequences.
 */
export const matchLines = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Int32Array => {
  const ids = new Map<string, number>()
  const intern = (line: string): number => {
    let id = ids.get(line)
    if (id === undefined) {
      id = ids.size
      ids.set(line, id)
    }
    return id
  }
  const aIds = a.map(intern)
  const bIds = b.map(intern)
  // Lines found on one side only can never match; dropping them first keeps D (and the time)
  // small when most lines changed, and leaves the LCS unchanged.
  const inA = new Uint8Array(ids.size)
  const inB = new Uint8Array(ids.size)
  for (const id of aIds) inA[id] = 1
  for (const id of bIds) inB[id] = 1
  const aKept: Array<number> = []
  const bKept: Array<number> = []
  aIds.forEach((id, i) => inB[id] === 1 && aKept.push(i))
  bIds.forEach((id, i) => inA[id] === 1 && bKept.push(i))
  const x = Int32Array.from(aKept, (i) => aIds[i] as number)
  const y = Int32Array.from(bKept, (i) => bIds[i] as number)
  const keptMatch = new Int32Array(x.length).fill(-1)
  myers(x, y, keptMatch)
  const match = new Int32Array(a.length).fill(-1)
  keptMatch.forEach((j, i) => {
    if (j !== -1) match[aKept[i] as number] = bKept[j] as number
  })
  return match
}

/** Fills `match` for the whole of `a` and `b`; ranges wait on an explicit stack, so no deep recursion. */
const myers = (a: Int32Array, b: Int32Array, match: Int32Array): void => {
  const stack: Array<number> = [0, a.length, 0, b.length]
  while (stack.length > 0) {
    let bHi = stack.pop() as number
    let bLo = stack.pop() as number
    let aHi = stack.pop() as number
    let aLo = stack.pop() as number
    while (aLo < aHi && bLo < bHi && a[aLo] === b[bLo]) match[aLo++] = bLo++
    while (aLo < aHi && bLo < bHi && a[aHi - 1] === b[bHi - 1]) match[--aHi] = --bHi
    if (aLo === aHi || bLo === bHi) continue
    const split = bisect(a, aLo, aHi, b, bLo, bHi)
    // No split: nothing in common. A split at a corner cannot happen; refusing it rules out a loop.
    if (split === undefined) continue
    const [x, y] = split
    if ((x === aLo && y === bLo) || (x === aHi && y === bHi)) continue
    stack.push(aLo, x, bLo, y, x, aHi, y, bHi)
  }
}

/**
 * A point on an optimal edit path through a[aLo, aHi) x b[bLo, bHi), found where a forward and a
 * reverse search of about D/2 edits each meet, or undefined when the ranges share no line.
 */
const bisect = (a: Int32Array, aLo: number, aHi: number, b: Int32Array, bLo: number, bHi: number): readonly [number, number] | undefined => {
  const n = aHi - aLo
  const m = bHi - bLo
  const maxD = Math.ceil((n + m) / 2)
  const off = maxD + 1
  const size = 2 * maxD + 3
  // Furthest x reached on each diagonal k (index off + k); forward from the start, reverse from the end.
  const fwd = new Int32Array(size).fill(-1)
  const rev = new Int32Array(size).fill(-1)
  fwd[off + 1] = 0
  rev[off + 1] = 0
  const delta = n - m
  const oddDelta = delta % 2 !== 0
  // Diagonals that ran off the grid are not extended again.
  let fStart = 0
  let fEnd = 0
  let rStart = 0
  let rEnd = 0
  // Past this many edits each way, settle for a good split instead of the best one (as GNU diff
  // does): the script stays a valid common subsequence, and time stays near-linear on huge rewrites.
  const cap = Math.max(256, 4 * Math.ceil(Math.sqrt(n + m)))
  for (let d = 0; d < maxD; d++) {
    if (d > cap) return furthest(fwd, off, d - 1, fStart, fEnd, n, m, aLo, bLo)
    for (let k = -d + fStart; k <= d - fEnd; k += 2) {
      const i = off + k
      let x = k === -d || (k !== d && (fwd[i - 1] as number) < (fwd[i + 1] as number)) ? fwd[i + 1] as number : (fwd[i - 1] as number) + 1
      let y = x - k
      while (x < n && y < m && a[aLo + x] === b[bLo + y]) {
        x++
        y++
      }
      fwd[i] = x
      if (x > n) fEnd += 2
      else if (y > m) fStart += 2
      else if (oddDelta) {
        const j = off + delta - k
        if (j >= 0 && j < size && rev[j] !== -1 && x >= n - (rev[j] as number)) return [aLo + x, bLo + y]
      }
    }
    for (let k = -d + rStart; k <= d - rEnd; k += 2) {
      const i = off + k
      let x = k === -d || (k !== d && (rev[i - 1] as number) < (rev[i + 1] as number)) ? rev[i + 1] as number : (rev[i - 1] as number) + 1
      let y = x - k
      while (x < n && y < m && a[aHi - 1 - x] === b[bHi - 1 - y]) {
        x++
        y++
      }
      rev[i] = x
      if (x > n) rEnd += 2
      else if (y > m) rStart += 2
      else if (!oddDelta) {
        const j = off + delta - k
        if (j >= 0 && j < size && fwd[j] !== -1) {
          const fx = fwd[j] as number
          if (fx >= n - x) return [aLo + fx, bLo + fx - (j - off)]
        }
      }
    }
  }
  return undefined
}

/** The forward frontier's point that got furthest (largest x + y), inside the grid and not at its end. */
const furthest = (fwd: Int32Array, off: number, d: number, fStart: number, fEnd: number, n: number, m: number, aLo: number, bLo: number): readonly [number, number] | undefined => {
  let best: readonly [number, number] | undefined
  let bestSum = 0
  for (let k = -d + fStart; k <= d - fEnd; k += 2) {
    const x = fwd[off + k] as number
    const y = x - k
    if (x < 0 || x > n || y < 0 || y > m || (x === n && y === m)) continue
    if (x + y > bestSum) {
      bestSum = x + y
      best = [aLo + x, bLo + y]
    }
  }
  return best
}

/** One step of an edit script: a run of equal lines, or lines removed from `a` and inserted from `b`. */
export interface Block {
  readonly aStart: number
  readonly aEnd: number
  readonly bStart: number
  readonly bEnd: number
  /** Equal runs have the same length on both sides; change blocks have at least one line on one side. */
  readonly equal: boolean
}

/** The edit script from `a` to `b` as alternating equal and change blocks, in order. */
export const diffBlocks = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<Block> => {
  const match = matchLines(a, b)
  const blocks: Array<Block> = []
  let i = 0
  let j = 0
  const push = (aEnd: number, bEnd: number, equal: boolean): void => {
    if (aEnd > i || bEnd > j) blocks.push({ aStart: i, aEnd, bStart: j, bEnd, equal })
    i = aEnd
    j = bEnd
  }
  while (i < a.length || j < b.length) {
    // Next matched line of `a` at or after i (or the end): everything before it is a change.
    let next = i
    while (next < a.length && match[next] === -1) next++
    const nextB = next < a.length ? match[next] as number : b.length
    push(next, nextB, false)
    let end = next
    while (end < a.length && match[end] === j + (end - next)) end++
    push(end, j + (end - next), true)
  }
  return blocks
}
