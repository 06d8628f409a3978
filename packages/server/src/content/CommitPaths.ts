/**
 * Finding things inside a published commit: a commit by hash (or a branch by
 * name, at its head), then a directory or file by path. Paths are checked
 * segment by segment, so `..`, `.`, empty segments and control characters
 * never reach a lookup.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Tree from "@grove/core/objects/Tree"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { Branches } from "./Branches.ts"
import type { CommitHeader } from "./CommitHeaders.ts"
import { ContentObjects } from "./ContentObjects.ts"

export type PathTarget =
  | { readonly kind: "tree"; readonly hash: string; readonly entries: ReadonlyArray<Tree.TreeEntry> }
  | { readonly kind: "blob"; readonly hash: string; readonly mode: Tree.BlobMode }

/** The segments of a repository path ("" is the root), or why it is not one. */
export const pathSegments = (path: string): { readonly ok: true; readonly segments: ReadonlyArray<string> } | { readonly ok: false; readonly reason: string } => {
  const trimmed = path.replace(/^\/+|\/+$/g, "")
  if (trimmed === "") return { ok: true, segments: [] }
  const segments = trimmed.split("/")
  for (const segment of segments) {
    const check = Tree.checkEntryName(segment)
    if (!check.ok) return { ok: false, reason: `invalid path '${path.slice(0, 200)}': ${check.reason}` }
  }
  return { ok: true, segments }
}

export class CommitPaths extends Context.Service<CommitPaths, {
  /** A published commit by hash, or the head commit of a branch by name. */
  readonly resolveCommit: (repoId: string, ref: string) => Effect.Effect<CommitHeader | undefined, SqlError>
  readonly resolvePath: (orgId: string, root: string, segments: ReadonlyArray<string>) => Effect.Effect<PathTarget | undefined, SqlError>
}>()("grove/server/content/CommitPaths") {
  static readonly layer = Layer.effect(CommitPaths, Effect.gen(function*() {
    const objects = yield* ContentObjects
    const branches = yield* Branches
    const commit = Effect.fnUntraced(function*(repoId: string, hash: string) {
      const found = (yield* objects.loadCommitHeaders(repoId, [hash])).get(hash)
      return found?.published === true ? found : undefined
    })
    return CommitPaths.of({
      resolveCommit: Effect.fnUntraced(function*(repoId, ref) {
        if (Blake3.isHash(ref)) return yield* commit(repoId, ref)
        const branch = yield* branches.get(repoId, ref)
        return branch?.head == null ? undefined : yield* commit(repoId, branch.head)
      }),
      resolvePath: Effect.fnUntraced(function*(orgId, root, segments) {
        const load = (hash: string) =>
          hash === Blake3.EMPTY_HASH
            ? Effect.succeed<ReadonlyArray<Tree.TreeEntry> | undefined>([])
            : objects.loadTrees(orgId, [hash]).pipe(Effect.map((m) => m.get(hash)))
        let hash = root
        let entries = yield* load(root)
        if (entries === undefined) return undefined
        for (const [i, segment] of segments.entries()) {
          const entry: Tree.TreeEntry | undefined = entries.find((e) => e.name === segment)
          if (entry === undefined) return undefined
          if (entry.kind === "blob") {
            return i === segments.length - 1 && Tree.isBlobMode(entry.mode) ? { kind: "blob", hash: entry.hash, mode: entry.mode } : undefined
          }
          hash = entry.hash
          entries = yield* load(hash)
          if (entries === undefined) return undefined
        }
        return { kind: "tree", hash, entries: Tree.sortEntries(entries) }
      })
    })
  }))
}
