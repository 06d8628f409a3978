/**
 * A job's `cache`: before its steps, the archive saved under the key for this branch (or, when
 * the branch has none, for main) is unpacked into the working directory; after a successful job,
 * the listed paths are packed (tar, gzip) into the object store under the key for this branch.
 * tar runs as the job's user in a sandbox around the checkout (Sandbox.inSandbox, no network), so
 * an archive can write nothing the steps could not, and nothing outside the checkout.
 */
import { ObjectStore } from "@grove/storage"
import { Effect, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { createReadStream, createWriteStream } from "node:fs"
import { rm } from "node:fs/promises"
import * as path from "node:path"
import { type Command, inSandbox, type Isolation, type RunUser } from "./Sandbox.ts"

export interface CacheTarget {
  readonly repoId: string
  readonly orgId: string
  readonly branch: string
  readonly key: string
}

const namespace = (orgId: string) => `ci-${orgId}`

/** Where tar runs: the job's sandbox, as its user. */
export interface CacheRunner {
  readonly isolation: Isolation
  readonly user: RunUser | undefined
}

const tarCommand = (args: ReadonlyArray<string>, cwd: string, runner: CacheRunner) => inSandbox(runner.isolation, runner.user, cwd, false, ["tar", ...args])

const spawnTar = (command: Command, cwd: string) =>
  spawn(command.file, [...command.args], {
    cwd,
    stdio: ["pipe", "pipe", "pipe"],
    ...(command.user === undefined ? {} : { uid: command.user.uid, gid: command.user.gid }),
    env: { PATH: "/usr/bin:/bin" }
  })

/** Restores the cache into `dir`; answers which branch's archive it used, if any. */
export const restore = Effect.fnUntraced(function*(target: CacheTarget, dir: string, runner: CacheRunner) {
  const sql = yield* SqlClient.SqlClient
  const store = yield* ObjectStore.ObjectStore
  const rows = yield* sql<{ branch: string; object_hash: string }>`SELECT branch, object_hash FROM ci_caches
    WHERE repo_id = ${target.repoId} AND cache_key = ${target.key} AND branch IN (${target.branch}, 'main')
    ORDER BY branch = ${target.branch} DESC LIMIT 1`
  const found = rows[0]
  if (found === undefined) return undefined
  const child = spawnTar(yield* tarCommand(["-xzf", "-", "--no-same-owner", "--no-same-permissions"], dir, runner), dir)
  const done = new Promise<number>((resolve) => child.on("close", (code) => resolve(code ?? 1)))
  yield* Stream.runForEach(store.get({ namespace: namespace(target.orgId), hash: found.object_hash }), (part) =>
    Effect.promise(() => new Promise<void>((resolve) => child.stdin.write(part, () => resolve())))).pipe(
      Effect.ensuring(Effect.sync(() => child.stdin.end()))
    )
  const code = yield* Effect.promise(() => done)
  return code === 0 ? found.branch : undefined
})

/** Saves `paths` of `dir` under the key; answers the archive's size, or undefined when none of the paths exist. */
export const save = Effect.fnUntraced(function*(target: CacheTarget, paths: ReadonlyArray<string>, dir: string, scratch: string, runner: CacheRunner) {
  const sql = yield* SqlClient.SqlClient
  const store = yield* ObjectStore.ObjectStore
  const file = path.join(scratch, `cache-${randomBytes(8).toString("hex")}.tgz`)
  const command = yield* tarCommand(["-czf", "-", "--ignore-failed-read", "--", ...paths], dir, runner)
  const packed = yield* Effect.promise(() =>
    new Promise<{ code: number; hash: string; size: number }>((resolve) => {
      const child = spawnTar(command, dir)
      const hash = createHash("sha256")
      let size = 0
      const out = createWriteStream(file, { mode: 0o600 })
      child.stdout.on("data", (part: Buffer) => {
        hash.update(part)
        size += part.length
      })
      child.stdout.pipe(out)
      let code = 1
      child.on("close", (exit) => {
        code = exit ?? 1
      })
      out.on("close", () => resolve({ code, hash: hash.digest("hex"), size }))
    })
  )
  // tar exits 2 when a path is missing (with --ignore-failed-read it still packs the rest).
  if (packed.code > 2 || packed.size === 0) return yield* removeFile(file).pipe(Effect.as(undefined))
  return yield* Effect.gen(function*() {
    yield* store.put(
      { namespace: namespace(target.orgId), hash: packed.hash },
      Stream.fromAsyncIterable(createReadStream(file) as AsyncIterable<Uint8Array>, (cause) => new Error(String(cause)))
    )
    yield* sql`INSERT INTO ci_caches ${
      sql.insert({ repo_id: target.repoId, branch: target.branch, cache_key: target.key, object_hash: packed.hash, bytes: packed.size })
    } ON CONFLICT (repo_id, branch, cache_key) DO UPDATE SET object_hash = EXCLUDED.object_hash, bytes = EXCLUDED.bytes, updated_at = now()`
    return packed.size
  }).pipe(Effect.ensuring(removeFile(file)))
})

const removeFile = (file: string) => Effect.promise(() => rm(file, { force: true }))
