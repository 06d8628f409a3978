import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as DbEmbedded from "./DbEmbedded.ts"
import * as PgliteInit from "./PgliteInit.ts"

// A PGlite start takes seconds, tens of them on a busy machine.
const TIMEOUT = 240_000
// Above any pid Linux hands out by default (pid_max 4194304): an init whose process is gone.
const DEAD_PID = 4_194_303

const tempRoot = () => fs.mkdtempSync(path.join(os.tmpdir(), "grove-pglite-init-"))
const siblings = (dir: string) => fs.readdirSync(path.dirname(dir)).filter((name) => name !== path.basename(dir)).sort()

/** Runs `use` against the embedded database in `dir`, opened and closed around it. */
const withDb = <A>(dir: string, use: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.gen(function*() {
    return yield* use(yield* SqlClient.SqlClient)
  }).pipe(Effect.provide(Layer.fresh(DbEmbedded.layer({ dataDir: dir }))), Effect.scoped)

/** Whether a process runs with `arg` on its command line. */
const initRunning = (arg: string) =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).some((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(arg)
    } catch {
      return false
    }
  })

const waitFor = async (check: () => boolean, what: string, ms = 120_000) => {
  const until = Date.now() + ms
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe("PgliteInit", () => {
  it.effect("a fresh directory is initialized beside itself, usable, and reopened with its data", () =>
    Effect.gen(function*() {
      const dir = path.join(tempRoot(), "db")
      try {
        yield* withDb(dir, (sql) => Effect.gen(function*() {
          yield* sql`CREATE TABLE t (id int PRIMARY KEY)`
          yield* sql`INSERT INTO t VALUES (7)`
        }))
        assert.isTrue(PgliteInit.isInitialized(dir))
        // No temporary directory left beside it.
        assert.deepStrictEqual(siblings(dir), [])
        const rows = yield* withDb(dir, (sql) => sql<{ id: number }>`SELECT id FROM t`)
        assert.deepStrictEqual(rows.map((r) => r.id), [7])
      } finally {
        fs.rmSync(path.dirname(dir), { recursive: true, force: true })
      }
    }), TIMEOUT)

  it.effect("an interrupted first start is recovered: leftovers removed, a directory without PG_VERSION moved aside", () =>
    Effect.gen(function*() {
      const dir = path.join(tempRoot(), "db")
      try {
        // What a kill during a first start leaves: an older version's half-written directory, and a
        // temporary directory of an init whose process is gone.
        fs.mkdirSync(path.join(dir, "base"), { recursive: true })
        fs.writeFileSync(path.join(dir, "base", "half"), "x")
        fs.mkdirSync(`${dir}.init-${DEAD_PID}/global`, { recursive: true })
        const rows = yield* withDb(dir, (sql) => sql<{ v: number }>`SELECT 1 AS v`)
        assert.deepStrictEqual(rows.map((r) => r.v), [1])
        const left = siblings(dir)
        assert.strictEqual(left.length, 1, left.join(", "))
        assert.match(left[0]!, /^db\.incomplete-\d+$/)
        assert.isTrue(fs.existsSync(path.join(path.dirname(dir), left[0]!, "base", "half")))
      } finally {
        fs.rmSync(path.dirname(dir), { recursive: true, force: true })
      }
    }), TIMEOUT)

  it.effect("a process killed during its first start leaves no database; the next start initializes one", () =>
    Effect.gen(function*() {
      const dir = path.join(tempRoot(), "db")
      try {
        // A process running the first start, killed once initdb is writing.
        const script = `import(${JSON.stringify(path.join(import.meta.dirname, "PgliteInit.ts"))}).then((m) => m.initialize(process.argv[1], JSON.parse(process.argv[2])))`
        const starter = spawn(process.execPath, ["-e", script, dir, JSON.stringify(DbEmbedded.START_PARAMS)], { stdio: "ignore" })
        const temp = `${dir}.init-${starter.pid}`
        yield* Effect.promise(() => waitFor(() => fs.existsSync(temp) && fs.readdirSync(temp).length > 0, `files in ${temp}`))
        starter.kill("SIGKILL")
        yield* Effect.promise(() => new Promise((resolve) => starter.exitCode !== null || starter.signalCode !== null ? resolve(undefined) : starter.once("exit", resolve)))
        assert.isFalse(fs.existsSync(dir), "the killed start left a database directory")
        // Its init process sees its parent gone and stops too.
        yield* Effect.promise(() => waitFor(() => !initRunning(temp), `the init process on ${temp} to stop`))
        const rows = yield* withDb(dir, (sql) => sql<{ n: string }>`SELECT count(*) AS n FROM pg_database WHERE datname = 'postgres'`)
        assert.strictEqual(Number(rows[0]!.n), 1)
        assert.isFalse(fs.existsSync(temp), "the killed start's temporary directory is still there")
      } finally {
        fs.rmSync(path.dirname(dir), { recursive: true, force: true })
      }
    }), TIMEOUT)

  it.effect("concurrent initializers of one directory take turns: one database, used by all, nothing moved aside", () =>
    Effect.gen(function*() {
      const dir = path.join(tempRoot(), "db")
      try {
        // Another process and two callers in this one, all at once; a dead process's lock is taken over.
        fs.mkdirSync(path.dirname(dir), { recursive: true })
        fs.writeFileSync(`${dir}.init.lock`, String(DEAD_PID))
        const script = `import(${JSON.stringify(path.join(import.meta.dirname, "PgliteInit.ts"))}).then((m) => m.initialize(process.argv[1], JSON.parse(process.argv[2])))`
        const other = spawn(process.execPath, ["-e", script, dir, JSON.stringify(DbEmbedded.START_PARAMS)], { stdio: "ignore" })
        const otherExit = new Promise<number | null>((resolve) => other.once("exit", resolve))
        const inodes: Array<number> = []
        const here = () => PgliteInit.initialize(dir, DbEmbedded.START_PARAMS).then(() => void inodes.push(fs.statSync(dir).ino))
        // How many inits run at once, seen by their temporary directories (initdb takes seconds).
        let most = 0
        const watch = setInterval(() => (most = Math.max(most, siblings(dir).filter((name) => /^db\.init-\d+$/.test(name)).length)), 20)
        try {
          yield* Effect.promise(() => Promise.all([here(), here()]))
          assert.strictEqual(yield* Effect.promise(() => otherExit), 0)
        } finally {
          clearInterval(watch)
        }
        assert.strictEqual(most, 1, "inits of one directory ran at the same time")
        // Both callers here ended on the directory that is still there, and nothing was moved aside.
        assert.deepStrictEqual(inodes, [fs.statSync(dir).ino, fs.statSync(dir).ino])
        assert.deepStrictEqual(siblings(dir), [])
        const rows = yield* withDb(dir, (sql) => sql<{ n: string }>`SELECT count(*) AS n FROM pg_database WHERE datname = 'postgres'`)
        assert.strictEqual(Number(rows[0]!.n), 1)
      } finally {
        fs.rmSync(path.dirname(dir), { recursive: true, force: true })
      }
    }), TIMEOUT)

  it.effect("a failing init reports its output and leaves nothing behind", () =>
    Effect.gen(function*() {
      const dir = path.join(tempRoot(), "db")
      try {
        const error = yield* Effect.promise(() => PgliteInit.initialize(dir, [...DbEmbedded.START_PARAMS, "-c", "no_such_setting=1"]).then(() => undefined, (e: unknown) => e))
        assert.instanceOf(error, Error)
        assert.match((error as Error).message, /initdb in a child process failed/)
        assert.isFalse(fs.existsSync(dir))
        assert.deepStrictEqual(siblings(dir), [])
      } finally {
        fs.rmSync(path.dirname(dir), { recursive: true, force: true })
      }
    }), TIMEOUT)
})
