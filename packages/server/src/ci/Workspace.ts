/**
 * A job's working directory: a fresh directory under the CI work root holding the files of the
 * run's commit (all of them: path permissions do not apply inside CI), owned by the user steps
 * run as, and removed afterwards. Files are created exclusively (never through an existing
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

const exec = promisify(execFile)

export interface RunUser {
  readonly uid: number
  readonly gid: number
}

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

/** The uid and gid of `name` from /etc/passwd; undefined when the server does not run as root. */
export const runUser = (name: string): Effect.Effect<RunUser | undefined> =>
  Effect.promise(async () => {
    if (process.getuid?.() !== 0) return undefined
    const { stdout } = await exec("id", ["-u", name]).catch(() => ({ stdout: "" }))
    const { stdout: group } = await exec("id", ["-g", name]).catch(() => ({ stdout: "" }))
    const uid = Number(stdout.trim())
    const gid = Number(group.trim())
    if (stdout.trim() === "" || !Number.isInteger(uid) || uid === 0) {
      throw new Error(`the CI user ${name} does not exist (or is root); set --ci-user to an unprivileged user`)
    }
    return { uid, gid }
  })
