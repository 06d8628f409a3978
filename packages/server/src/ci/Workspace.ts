/**
 * A job's working directory: a fresh directory under the CI work root holding the files of the
 * run's commit (all of them: path permissions do not apply inside CI), owned by the job's own
 * host user (Sandbox.jobUser), bound into the job's sandboxes alone, and removed afterwards. Files are created exclusively (never through an existing
 * symlink); names were checked when they were pushed.
 */
import { Effect, Stream } from "effect"
import { execFile } from "node:child_process"
import { mkdir, mkdtemp, open, rm, symlink } from "node:fs/promises"
import * as path from "node:path"
import { promisify } from "node:util"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { storedSnapshot } from "../content/StoredSnapshot.ts"
import type { RunUser } from "./Sandbox.ts"

const exec = promisify(execFile)


/** Creates the work root, traversable (not listable) by the run user. */
export const prepareRoot = (root: string) => Effect.promise(() => mkdir(root, { recursive: true, mode: 0o711 }).then(() => undefined))

/** Writes the tree of `commit` into a new directory and answers its path. */
export const checkout = Effect.fnUntraced(function*(
  root: string,
  label: string,
  repo: { readonly id: string; readonly orgId: string },
  commit: string,
  user: RunUser | undefined
) {
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore
  const row = (yield* objects.loadCommits(repo.id, [commit])).get(commit)
  if (row === undefined) return yield* Effect.fail(new Error(`commit ${commit} is not stored`))
  const source = storedSnapshot(repo.orgId, objects, chunks)
  const dir = yield* Effect.promise(() => mkdtemp(path.join(root, `${label}-`)))
  const write = (hash: string, into: string): Effect.Effect<void, unknown> =>
    Effect.gen(function*() {
      for (const entry of yield* source.readTree(hash)) {
        const target = path.join(into, entry.name)
        if (entry.kind === "tree") {
          yield* Effect.promise(() => mkdir(target))
          yield* write(entry.hash, target)
        } else if (entry.mode === "symlink") {
          const parts: Array<Uint8Array> = []
          yield* Stream.runForEach(source.readBlob(entry.hash), (part) => Effect.sync(() => parts.push(part)))
          yield* Effect.promise(() => symlink(Buffer.concat(parts).toString("utf8"), target))
        } else {
          const file = yield* Effect.promise(() => open(target, "wx", entry.mode === "executable" ? 0o755 : 0o644))
          yield* Stream.runForEach(source.readBlob(entry.hash), (part) => Effect.promise(() => file.write(part).then(() => undefined))).pipe(
            Effect.ensuring(Effect.promise(() => file.close()))
          )
        }
      }
    })
  yield* write(row.manifest_hash, dir).pipe(Effect.onError(() => remove(dir)))
  if (user !== undefined) yield* Effect.promise(() => exec("chown", ["-R", "-h", `${user.uid}:${user.gid}`, dir]))
  return dir
})

export const remove = (dir: string) => Effect.promise(() => rm(dir, { recursive: true, force: true }).catch(() => undefined))
