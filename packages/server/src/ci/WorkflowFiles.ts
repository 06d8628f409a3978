/**
 * The workflows of a commit: every `.oak/workflows/*.yml|yaml` blob of its tree, parsed. A file
 * that cannot be a workflow (too large, a symlink, not UTF-8, invalid) comes back `Invalid`
 * with a readable error, so it becomes a failed run instead of being skipped silently.
 *
 * A tree never changes under its hash: the parsed workflows of a commit's tree, and of a `.oak/workflows`
 * tree, are kept (a few hundred of each). And a commit seen published stays its repository's and published (its row is never changed
 * otherwise, nor removed), so its tree's hash is kept too: starting a run at a commit seen before reads
 * nothing of the store or the database.
 */
import { type ParsedWorkflow, isWorkflowPath, parseWorkflow, workflowName } from "@grove/core/ci/Workflow"
import { Data, Effect, Stream } from "effect"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { storedSnapshot } from "../content/StoredSnapshot.ts"

/** The commit is not one of the repository's. */
export class CommitNotFound extends Data.TaggedError("CommitNotFound")<{ readonly commit: string }> {}

const MAX_WORKFLOW_BYTES = 256 * 1024

/** Parsed workflows by organization and tree hash, least recently used first. */
const parsedTrees = new Map<string, ReadonlyArray<ParsedWorkflow>>()
const TREES_KEPT = 256
/** Parsed workflows by organization and the hash of their `.oak/workflows` tree, least recently used first. */
const parsedFolders = new Map<string, ReadonlyArray<ParsedWorkflow>>()
/** The tree hash of a published commit, by repository and commit, least recently used first. */
const publishedTrees = new Map<string, string>()
const COMMITS_KEPT = 1024

/** Moves `key` to the most recently used end of `map`, answering its value. */
const touch = <V>(map: Map<string, V>, key: string): V | undefined => {
  const value = map.get(key)
  if (value !== undefined) {
    map.delete(key)
    map.set(key, value)
  }
  return value
}

/** Keeps `value` under `key` as the most recently used, dropping the least recently used past `max`. */
const keep = <V>(map: Map<string, V>, key: string, value: V, max: number): V => {
  map.set(key, value)
  if (map.size > max) map.delete(map.keys().next().value!)
  return value
}

/** The tree hash of `commit`, a published commit of the repository's; read once, then kept. */
const treeOf = Effect.fnUntraced(function*(repoId: string, commit: string) {
  const key = `${repoId}\0${commit}`
  const known = touch(publishedTrees, key)
  if (known !== undefined) return known
  const row = (yield* (yield* ContentObjects).loadCommitHeaders(repoId, [commit])).get(commit)
  // Not (yet) published: read again next time.
  if (row === undefined || !row.published) return yield* new CommitNotFound({ commit })
  return keep(publishedTrees, key, row.manifest_hash, COMMITS_KEPT)
})

/**
 * `tree`: the commit's root tree, when the caller knows the commit is the repository's and published (a `merge`
 * event: the statement that published the squash commit wrote it); else the commit is read and checked.
 */
export const workflowsAt = Effect.fnUntraced(function*(
  repo: { readonly id: string; readonly orgId: string },
  commit: string,
  tree: string | undefined = undefined
) {
  if (tree === undefined) tree = yield* treeOf(repo.id, commit)
  const key = `${repo.orgId}\0${tree}`
  const known = touch(parsedTrees, key)
  if (known !== undefined) return known
  return keep(parsedTrees, key, yield* readWorkflows(repo.orgId, tree), TREES_KEPT)
})

const readWorkflows = Effect.fnUntraced(function*(orgId: string, manifest: string) {
  const source = storedSnapshot(orgId, yield* ContentObjects, yield* ChunkStore)
  const oak = (yield* source.readTree(manifest)).find((e) => e.name === ".oak" && e.kind === "tree")
  if (oak === undefined) return [] as ReadonlyArray<ParsedWorkflow>
  const folder = (yield* source.readTree(oak.hash)).find((e) => e.name === "workflows" && e.kind === "tree")
  if (folder === undefined) return [] as ReadonlyArray<ParsedWorkflow>
  // Each merge has a root tree of its own, yet its workflows' folder is nearly always the one before it.
  const key = `${orgId}\0${folder.hash}`
  const known = touch(parsedFolders, key)
  if (known !== undefined) return known
  return keep(parsedFolders, key, yield* readFolder(source, folder.hash), TREES_KEPT)
})

const readFolder = Effect.fnUntraced(function*(source: ReturnType<typeof storedSnapshot>, folder: string) {
  const out: Array<ParsedWorkflow> = []
  for (const entry of yield* source.readTree(folder)) {
    const path = `.oak/workflows/${entry.name}`
    if (entry.kind !== "blob" || !isWorkflowPath(path)) continue
    const invalid = (error: string): ParsedWorkflow => ({ _tag: "Invalid", name: workflowName(path), path, error: `${path}:1: ${error}` })
    if (entry.mode === "symlink") {
      out.push(invalid("a workflow file must be a regular file, not a symlink"))
      continue
    }
    if ((yield* source.blobSize(entry.hash)) > MAX_WORKFLOW_BYTES) {
      out.push(invalid(`a workflow file must be at most ${MAX_WORKFLOW_BYTES / 1024} KiB`))
      continue
    }
    const parts: Array<Uint8Array> = []
    yield* Stream.runForEach(source.readBlob(entry.hash), (part) => Effect.sync(() => parts.push(part)))
    let text: string
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(parts))
    } catch {
      out.push(invalid("a workflow file must be UTF-8 text"))
      continue
    }
    out.push(parseWorkflow(path, text))
  }
  return out.sort((a, b) => pathOf(a) < pathOf(b) ? -1 : 1) as ReadonlyArray<ParsedWorkflow>
})

const pathOf = (parsed: ParsedWorkflow) => parsed._tag === "Valid" ? parsed.workflow.path : parsed.path
