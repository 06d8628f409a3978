/**
 * Files the server withholds from this checkout (path permissions, `.oak/PERMISSIONS`): a pull names
 * their blobs in `restricted_blobs` and sends no bytes, so they are never written. Their hashes are kept
 * in `.grove/withheld.json`; a file of the base commit whose blob is withheld and that is not on disk is
 * not a deletion (a commit keeps it as it is), and checkouts skip it.
 */
import type { Objects } from "@grove/core"
import * as fsSync from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import type { CliFailure } from "../Failures.ts"
import { io, writeJsonAtomic } from "./Io.ts"

type Snapshot = Objects.FileChanges.Snapshot

const fileOf = (root: string) => path.join(root, ".grove", "withheld.json")

const EMPTY: ReadonlySet<string> = new Set()

/** The withheld blob hashes (none when the file is missing or unreadable: nothing is withheld then). */
export const readWithheld = (root: string): ReadonlySet<string> => {
  try {
    const parsed = JSON.parse(fsSync.readFileSync(fileOf(root), "utf8")) as unknown
    return Array.isArray(parsed) ? new Set(parsed.filter((h): h is string => typeof h === "string")) : EMPTY
  } catch {
    return EMPTY
  }
}

/**
 * Records what pull answers withheld; blobs an answer sent are readable now and leave the set.
 * Answers carrying no commits say nothing new (their lists cover only the commits they send).
 */
export const recordWithheld = (
  root: string,
  answers: ReadonlyArray<{ readonly commits: ReadonlyArray<unknown>; readonly blobs: ReadonlyArray<{ readonly hash: string }>; readonly restricted_blobs?: ReadonlyArray<string> | undefined }>
): Effect.Effect<ReadonlySet<string>, CliFailure> => {
  const before = readWithheld(root)
  const next = new Set(before)
  for (const answer of answers) {
    if (answer.commits.length === 0) continue
    for (const b of answer.blobs) next.delete(b.hash)
    for (const h of answer.restricted_blobs ?? []) next.add(h)
  }
  if (next.size === before.size && [...next].every((h) => before.has(h))) return Effect.succeed(before)
  return io("cannot record the withheld files", () => writeJsonAtomic(fileOf(root), [...next].sort())).pipe(Effect.as(next))
}

/** `snapshot` without the files whose blobs are withheld. */
export const withoutWithheld = (snapshot: Snapshot, withheld: ReadonlySet<string>): Snapshot =>
  withheld.size === 0 ? snapshot : new Map([...snapshot].filter(([, e]) => !withheld.has(e.hash)))

/** How many files of `snapshot` are withheld. */
export const countWithheld = (snapshot: Snapshot, withheld: ReadonlySet<string>): number =>
  withheld.size === 0 ? 0 : [...snapshot.values()].filter((e) => withheld.has(e.hash)).length

/** The working tree's snapshot with the withheld files of `base` it lacks (never written here, so not deleted). */
export const keepWithheld = (base: Snapshot, scanned: Snapshot, withheld: ReadonlySet<string>): Snapshot => {
  if (withheld.size === 0) return scanned
  const kept = [...base].filter(([file, e]) => withheld.has(e.hash) && !scanned.has(file))
  return kept.length === 0 ? scanned : new Map([...scanned, ...kept])
}

/** What clone and pull say when files were left out (no final period: pull's events add it). */
export const withheldLine = (count: number): string =>
  `left out ${count} path(s) withheld by path permissions (.oak/PERMISSIONS): not readable with your access`
