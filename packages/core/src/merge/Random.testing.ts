import { hash } from "../objects/Blake3.ts"
import type { BlobMode } from "../objects/Tree.ts"
import type { Snapshot } from "../objects/FileChanges.ts"
import { buildTrees } from "./Snapshots.ts"

/** A seeded PRNG (mulberry32) for the property tests of this folder: same seed, same cases. */
export interface Random {
  /** Uniform in [0, 1). */
  readonly next: () => number
  /** Uniform integer in [0, n). */
  readonly int: (n: number) => number
  readonly pick: <A>(items: ReadonlyArray<A>) => A
}

export const seeded = (seed: number): Random => {
  let state = seed | 0
  const next = (): number => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number): number => Math.floor(next() * n)
  return { next, int, pick: (items) => items[int(items.length)] as (typeof items)[number] }
}

/**
 * Random files over a small alphabet of names and contents, so directories nest and repeat and
 * blobs are shared. A file may also be the directory of another; callers filter when it matters.
 */
export const randomFiles = (rnd: Random, files: number): Map<string, { hash: string; mode: BlobMode }> => {
  const out = new Map<string, { hash: string; mode: BlobMode }>()
  for (let i = 0; i < files; i++) {
    const dirs = Array.from({ length: rnd.int(3) }, () => rnd.pick(["d1", "d2", "src", "é"]))
    out.set([...dirs, `f${rnd.int(6)}`].join("/"), randomFile(rnd))
  }
  return out
}

export const randomFile = (rnd: Random): { hash: string; mode: BlobMode } => ({
  hash: hash(`c${rnd.int(8)}`),
  mode: rnd.pick(["regular", "regular", "regular", "executable", "symlink"] as const)
})

/** `randomFiles` without any file that is also a directory: a valid snapshot. */
export const randomSnapshot = (rnd: Random, files: number): Map<string, { hash: string; mode: BlobMode }> => {
  const out = randomFiles(rnd, files)
  // Deleting while iterating is safe here: a removed path's prefixes are prefixes of the path that removed it.
  for (const path of out.keys()) {
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) out.delete(path.slice(0, i))
  }
  return out
}

/** A random edit of a snapshot: adds, deletes, content and mode changes, renames; still a valid snapshot. */
export const mutate = (rnd: Random, before: ReadonlyMap<string, { hash: string; mode: BlobMode }>): Map<string, { hash: string; mode: BlobMode }> => {
  const after = new Map(before)
  const edits = rnd.int(8)
  for (let e = 0; e < edits; e++) {
    const paths = [...after.keys()]
    const path = paths.length > 0 ? rnd.pick(paths) : undefined
    const kind = rnd.int(5)
    if (kind === 0 || path === undefined) {
      for (const [p, f] of randomFiles(rnd, 1)) after.set(p, f)
    } else if (kind === 1) after.delete(path)
    else if (kind === 2) after.set(path, { ...(after.get(path) as { hash: string; mode: BlobMode }), hash: randomFile(rnd).hash })
    else if (kind === 3) after.set(path, { ...(after.get(path) as { hash: string; mode: BlobMode }), mode: randomFile(rnd).mode })
    else {
      const file = after.get(path) as { hash: string; mode: BlobMode }
      after.delete(path)
      after.set(`${rnd.pick(["moved", "d1", "src"])}/${rnd.pick([path.slice(path.lastIndexOf("/") + 1), "renamed"])}`, file)
    }
  }
  for (const path of after.keys()) {
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) after.delete(path.slice(0, i))
  }
  return after
}

/** A snapshot from `{path: [hash, mode?]}`. */
export const snap = (files: Record<string, readonly [string, BlobMode?]>): Snapshot =>
  new Map(Object.entries(files).map(([path, [h, mode]]) => [path, { hash: h, mode: mode ?? "regular" }]))

/** buildTrees that throws on a failure (the tests build valid snapshots). */
export const build = (snapshot: Snapshot) => {
  const result = buildTrees(snapshot)
  if (!result.ok) throw new Error(result.reason)
  return result
}
