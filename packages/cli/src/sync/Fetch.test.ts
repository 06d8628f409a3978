/**
 * materialize refuses a tree holding `.grove` (where a checkout keeps its config, key and state) at any depth, whatever
 * the server: servers refuse such pushes now, but an older server may still hold one (test/server/sync.test.ts covers
 * the server's side). Nothing is fetched or written.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EMPTY_SNAPSHOT } from "../local/Commit.ts"
import { openAt } from "../local/Workspace.ts"
import { Objects } from "@grove/core"
import { failure } from "../Failures.ts"
import type { OnParsed, PullAnswer } from "./Fetch.ts"
import { checkFresh, materialize, storeFresh } from "./Fetch.ts"

const HASH = "a".repeat(64)

const tryInto = (files: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-fetch-test-"))
    const to = new Map(files.map((file) => [file, { hash: HASH, mode: "regular" as const }]))
    // No remote: anything that passed the check and was not local would fail with missing_object instead.
    const exit = yield* Effect.exit(materialize(openAt(root, { remote: "http://127.0.0.1:9" }), undefined, EMPTY_SNAPSHOT, to, new Map(), []))
    const left = fs.readdirSync(root)
    fs.rmSync(root, { recursive: true, force: true })
    return { exit, left }
  })

/** The failure's code and message ("success" when it did not fail). */
const codeOf = (exit: Exit.Exit<unknown, { readonly code: string; readonly message: string }>) => {
  if (Exit.isSuccess(exit)) return "success"
  const failure = Cause.squash(exit.cause) as { readonly code?: string; readonly message?: string }
  return `${failure.code}: ${failure.message}`
}

describe("materialize", () => {
  it.effect("refuses a root .grove in any spelling a checkout takes for it, before fetching or writing anything", () =>
    Effect.gen(function*() {
      for (const top of [".grove", ".GROVE", ".Grove", "grove~1", ".gr\u200cove"]) {
        const { exit, left } = yield* tryInto(["a.txt", `${top}/config.json`])
        expect(codeOf(exit)).toContain("reserved_path")
        expect(codeOf(exit)).toContain(`'${top}/'`)
        expect(left).toEqual([])
      }
    }))

  it.effect("refuses one at any depth too (the walk skips it: the files would read as deleted), nothing written", () =>
    Effect.gen(function*() {
      for (const [file, where] of [["d/.grove/x", "'d/.grove/'"], ["D/.GROVE/x", "'D/.GROVE/'"], ["a/b/grove~1/c", "'a/b/grove~1/'"], ["d/.grove", "'d/.grove'"]]) {
        const { exit, left } = yield* tryInto(["a.txt", "d/b.txt", file!])
        expect(codeOf(exit), file).toContain("reserved_path")
        expect(codeOf(exit), file).toContain(where)
        expect(left).toEqual([])
      }
    }))

  it.effect("takes look-alike names as plain paths", () =>
    Effect.gen(function*() {
      const { exit } = yield* tryInto(["sub/.grovex/config.json", ".grovex", "grove/x", "d/x.grove", "caf\u00e9/.groves"])
      expect(codeOf(exit)).not.toContain("reserved_path")
      expect(codeOf(exit)).toContain("missing_object")
    }))
})

/** A one-commit branch's pull answer: `top/` holds a.txt and b.txt, each one chunk named as its blob. */
const pullAnswer = () => {
  const a = "a".repeat(64)
  const b = "b".repeat(64)
  const sub: ReadonlyArray<Objects.Tree.TreeEntry> = [
    { name: "a.txt", kind: "blob", hash: a, mode: "regular" },
    { name: "b.txt", kind: "blob", hash: b, mode: "executable" }
  ]
  const subHash = Objects.Tree.hashTree(sub)
  const rootEntries: ReadonlyArray<Objects.Tree.TreeEntry> = [{ name: "top", kind: "tree", hash: subHash, mode: "tree" }]
  const rootHash = Objects.Tree.hashTree(rootEntries)
  const fields = { branch_name: "main", parent_hash: null, merge_parent_hash: null, manifest_hash: rootHash, author: "k5", message: "one", timestamp: "2026-11-28T16:00:00Z" }
  const hash = Objects.Commit.hashCommit({ ...fields, timestamp: Objects.Timestamp.parseTimestamp(fields.timestamp)! })
  return {
    head: hash,
    branch: null,
    branches: [],
    commits: [{ ...fields, hash, files: [] }],
    blobs: [a, b].map((h) => ({ hash: h, size: 10, chunks: [{ hash: h, offset: 0, size: 10 }] })),
    trees: [{ hash: rootHash, entries: rootEntries }, { hash: subHash, entries: sub }]
  } as unknown as PullAnswer
}

/** checkFresh of `answer`: its outcome and each onFiles call (the files and the wanted blobs' hashes). */
const checked = (answer: PullAnswer) =>
  Effect.gen(function*() {
    const told: Array<{ readonly files: ReadonlyMap<string, unknown>; readonly wanted: ReadonlyArray<string> }> = []
    const exit = yield* Effect.exit(checkFresh(Effect.succeed(answer), (files, wanted) => told.push({ files, wanted: wanted.map((b) => b.hash) })))
    return { exit, told }
  })

describe("checkFresh", () => {
  it.effect("tells a clone's files once, the checked answer's very snapshot", () =>
    Effect.gen(function*() {
      const { exit, told } = yield* checked(pullAnswer())
      expect(Exit.isSuccess(exit)).toBe(true)
      if (!Exit.isSuccess(exit)) return
      expect(told.length).toBe(1)
      expect(told[0]!.files).toBe(exit.value.snapshot)
      expect([...exit.value.snapshot]).toEqual([
        ["top/a.txt", { hash: "a".repeat(64), mode: "regular" }],
        ["top/b.txt", { hash: "b".repeat(64), mode: "executable" }]
      ])
      expect(told[0]!.wanted).toEqual(["a".repeat(64), "b".repeat(64)])
    }))

  // The chunk requests go out before the trees and commits are checked; the answer still fails on them (and the
  // clone, which places nothing before checkFresh is done, stops those requests and removes its folder).
  it.effect("tells the files before the trees and commits are checked, then fails a bad tree or commit as before", () =>
    Effect.gen(function*() {
      const good = pullAnswer()
      const badTree = { ...good, trees: good.trees.map((tree, i) => i === 1 ? { ...tree, entries: tree.entries.slice(0, 1) } : tree) }
      const bad = yield* checked(badTree)
      expect(codeOf(bad.exit)).toMatch(/^bad_object: the server sent a bad tree: tree hash mismatch/)
      expect(bad.told.map((t) => [...t.files.keys()])).toEqual([["top/a.txt"]])
      const badCommit = { ...good, commits: good.commits.map((c) => ({ ...c, author: "someone else" })) }
      const worse = yield* checked(badCommit)
      expect(codeOf(worse.exit)).toMatch(/^bad_object: the server sent a bad commit: commit hash mismatch/)
      expect(worse.told.length).toBe(1)
    }))

  it.effect("checks first when the trees as sent cannot be walked: a cycle, a missing tree, a missing head", () =>
    Effect.gen(function*() {
      const good = pullAnswer()
      // The root lists itself: endless unless checked first (its hash is not its content's).
      const root = good.trees[0]!
      const cycle = { ...good, trees: [{ hash: root.hash, entries: [...root.entries, { name: "again", kind: "tree", hash: root.hash, mode: "tree" }] }, good.trees[1]!] }
      const looped = yield* checked(cycle as PullAnswer)
      expect(codeOf(looped.exit)).toMatch(/^bad_object: the server sent a bad tree: tree hash mismatch/)
      expect(looped.told).toEqual([])
      const missing = yield* checked({ ...good, trees: [root] })
      expect(codeOf(missing.exit)).toBe(`missing_object: tree ${good.trees[1]!.hash} (at 'top') is missing`)
      expect(missing.told).toEqual([])
      const headless = yield* checked({ ...good, commits: [] })
      expect(codeOf(headless.exit)).toBe(`missing_object: commit ${good.head} is missing from the checkout (run grove pull)`)
      expect(headless.told).toEqual([])
    }))
})

/** checkFresh of a pull that hands `json` to onParsed, then decodes to `answer` (or fails, as a refused decode does). */
const parsedThen = (json: unknown, compact: boolean, answer: PullAnswer | undefined) =>
  Effect.gen(function*() {
    const order: Array<string> = []
    const told: Array<{ readonly files: ReadonlyMap<string, unknown>; readonly wanted: ReadonlyArray<string> }> = []
    let sent: boolean | undefined
    const pulled = (onParsed: OnParsed) =>
      Effect.suspend(() => {
        sent = onParsed(json, compact)
        order.push("decode")
        return answer === undefined ? failure("the answer does not decode", "bad_response") : Effect.succeed(answer)
      })
    const exit = yield* Effect.exit(checkFresh(pulled, (files, wanted) => {
      order.push("told")
      told.push({ files, wanted: wanted.map((b) => b.hash) })
    }))
    return { exit, told, order, sent }
  })

describe("checkFresh from the answer as parsed", () => {
  // A clone's chunk requests go out before the answer's decode (~60k values); one that does not decode still fails the
  // clone, which stops them and removes its folder (nothing is placed before checkFresh is done).
  it.effect("tells the files before the decode, plain or compact, and a refused decode still fails", () =>
    Effect.gen(function*() {
      const good = pullAnswer()
      const json = JSON.parse(JSON.stringify(good))
      const plain = yield* parsedThen(json, false, good)
      expect(plain.order).toEqual(["told", "decode"])
      expect(plain.sent).toBe(true)
      expect(Exit.isSuccess(plain.exit)).toBe(true)
      if (!Exit.isSuccess(plain.exit)) return
      expect(plain.told.length).toBe(1)
      expect(plain.told[0]!.files).toBe(plain.exit.value.snapshot)
      expect([...plain.exit.value.snapshot.keys()]).toEqual(["top/a.txt", "top/b.txt"])
      expect(plain.told[0]!.wanted).toEqual(["a".repeat(64), "b".repeat(64)])
      // Compact: one-chunk blobs without their chunk list; told with it put back.
      const compact = yield* parsedThen({ ...json, blobs: json.blobs.map(({ hash, size }: { hash: string; size: number }) => ({ hash, size })) }, true, good)
      expect(compact.order).toEqual(["told", "decode"])
      expect(compact.told.map((t) => t.wanted)).toEqual([["a".repeat(64), "b".repeat(64)]])
      const refused = yield* parsedThen(json, false, undefined)
      expect(refused.order).toEqual(["told", "decode"])
      expect(codeOf(refused.exit)).toBe("bad_response: the answer does not decode")
      // Withheld blobs are not asked for.
      const withheld = yield* parsedThen({ ...json, restricted_blobs: ["b".repeat(64)] }, false, good)
      expect(withheld.told.map((t) => t.wanted)).toEqual([["a".repeat(64)]])
    }))

  it.effect("an answer not of the expected shape is told only once decoded and checked, as before", () =>
    Effect.gen(function*() {
      const good = pullAnswer()
      const json = JSON.parse(JSON.stringify(good))
      for (const odd of [null, [], "x", { ...json, trees: {} }, { ...json, head: 5 }, { ...json, trees: [...json.trees, null] }, { ...json, blobs: [null] }]) {
        const { order, sent, exit, told } = yield* parsedThen(odd, false, good)
        expect(sent).toBe(false)
        expect(order).toEqual(["decode", "told"])
        expect(Exit.isSuccess(exit)).toBe(true)
        expect(told.map((t) => t.wanted)).toEqual([["a".repeat(64), "b".repeat(64)]])
      }
      // A cycle in the trees as sent: the walk gives up, the check refuses it.
      const root = json.trees[0]
      const cycle = { ...json, trees: [{ hash: root.hash, entries: [...root.entries, { name: "again", kind: "tree", hash: root.hash, mode: "tree" }] }, json.trees[1]] }
      const looped = yield* parsedThen(cycle, false, cycle as PullAnswer)
      expect(looped.sent).toBe(false)
      expect(codeOf(looped.exit)).toMatch(/^bad_object: the server sent a bad tree: tree hash mismatch/)
      expect(looped.told).toEqual([])
    }))
})

describe("storeFresh", () => {
  /** checkFresh then storeFresh of `answer` in a new folder: the outcome and the commit files written. */
  const stored = (answer: PullAnswer) =>
    Effect.gen(function*() {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-fetch-test-"))
      const workspace = openAt(root, { remote: "http://127.0.0.1:9" })
      const exit = yield* Effect.exit(Effect.flatMap(checkFresh(Effect.succeed(answer)), (fresh) => storeFresh(workspace, fresh)))
      const commits = fs.existsSync(path.join(root, ".grove/objects/commits"))
        ? fs.readdirSync(path.join(root, ".grove/objects/commits")).map((f) => JSON.parse(fs.readFileSync(path.join(root, ".grove/objects/commits", f), "utf8")))
        : []
      fs.rmSync(root, { recursive: true, force: true })
      return { exit, commits }
    })

  it.effect("stores a commit whose files a compact answer left out with the files rebuilt from its checked trees", () =>
    Effect.gen(function*() {
      const good = pullAnswer()
      const { files: _, ...commit } = good.commits[0]!
      const { exit, commits } = yield* stored({ ...good, commits: [commit] })
      expect(codeOf(exit)).toBe("success")
      expect(commits.map((c) => c.commit.files)).toEqual([[
        { path: "top/a.txt", change_type: "added", old_blob_hash: null, new_blob_hash: "a".repeat(64), new_mode: "regular" },
        { path: "top/b.txt", change_type: "added", old_blob_hash: null, new_blob_hash: "b".repeat(64), new_mode: "executable" }
      ]])
    }))

  it.effect("refuses one whose parent is not in the answer (nothing to rebuild from), and writes nothing", () =>
    Effect.gen(function*() {
      const good = pullAnswer()
      const { files: _, ...commit } = good.commits[0]!
      const orphan = { ...commit, parent_hash: "c".repeat(64) }
      const fields = { ...orphan, merge_parent_hash: null, timestamp: Objects.Timestamp.parseTimestamp(orphan.timestamp)! }
      const hash = Objects.Commit.hashCommit(fields)
      const { exit, commits } = yield* stored({ ...good, head: hash, commits: [{ ...orphan, hash }] })
      expect(codeOf(exit)).toBe(`bad_object: the server sent a bad answer: commit ${hash} came without its files and without its parent`)
      expect(commits).toEqual([])
    }))
})
