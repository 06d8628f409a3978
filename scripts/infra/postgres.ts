/**
 * A private PostgreSQL server from the Debian package, as a foreground child
 * bound to 127.0.0.1, with SCRAM password auth and a `grove` database.
 *
 * As a resource: `startPostgres()` inside a Scope (stopped, and its temp data
 * removed, when the scope closes). As a CLI, in the foreground until SIGINT/SIGTERM:
 *   npx node scripts/infra/postgres.ts [--port 5432] [--data-dir ./.grove-data/pg] [--durable]
 * A data dir is reused when it already holds a cluster; its password is kept in `<data-dir>/password`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Exit, Schema, Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { freePort, type ProcessError, runCommand, spawnServer } from "./process.ts"

export class PostgresError extends Schema.TaggedError<PostgresError>()("PostgresError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

export interface PostgresOptions {
  /** A fixed port; by default a free one. */
  readonly port?: number | undefined
  /** A directory to keep the cluster in (reused across runs); by default a temp dir removed at the end. */
  readonly dataDir?: string | undefined
  /** Default `grove`. */
  readonly database?: string | undefined
  /**
   * Leave `fsync`, `synchronous_commit` and `full_page_writes` at PostgreSQL's defaults (on), so
   * a committed transaction survives a crash of PostgreSQL or of the machine. By default they are
   * off: faster, and fine for tests, whose data is thrown away, but a crash loses the last
   * commits (acknowledged writes) and may corrupt the cluster.
   */
  readonly durable?: boolean | undefined
  /** Also write the server's output to this file (truncated at start). */
  readonly logFile?: string | undefined
}

export interface PostgresServer {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/<database>` */
  readonly url: string
  readonly host: string
  readonly port: number
  readonly database: string
  readonly username: string
  readonly password: string
  readonly dataDir: string
  /** The major version of the server binaries, e.g. `15`. */
  readonly version: string
  /** The postmaster's pid. */
  readonly pid: number
}

const PG_ROOT = "/usr/lib/postgresql"
const USERNAME = "postgres"

interface OsUser {
  readonly uid: number
  readonly gid: number
}

const fail = (message: string) => (cause: unknown) => new PostgresError({ message, cause })

/** The newest installed major version that has a server binary. */
export const findPostgresBin: Effect.Effect<{ version: string; bin: string }, PostgresError> = Effect.tryPromise({
  try: async () => {
    const versions = (await fs.readdir(PG_ROOT).catch(() => []))
      .filter((name) => /^\d+$/.test(name))
      .sort((a, b) => Number(b) - Number(a))
    for (const version of versions) {
      const bin = path.join(PG_ROOT, version, "bin")
      if (await fs.access(path.join(bin, "postgres")).then(() => true, () => false)) return { version, bin }
    }
    throw new Error(`no PostgreSQL server under ${PG_ROOT}/<version>/bin (run scripts/setup/system-deps.sh)`)
  },
  catch: fail("PostgreSQL is not installed")
})

/** The numeric ids of an OS user, from /etc/passwd. */
const osUser = (name: string): Effect.Effect<OsUser, PostgresError> =>
  Effect.tryPromise({
    try: async () => {
      const passwd = await fs.readFile("/etc/passwd", "utf8")
      for (const line of passwd.split("\n")) {
        const [user, , uid, gid] = line.split(":")
        if (user === name && uid !== undefined && gid !== undefined) return { uid: Number(uid), gid: Number(gid) }
      }
      throw new Error(`no OS user named ${name}`)
    },
    catch: fail(`cannot run as the ${name} OS user`)
  })

/**
 * Runs `effect` in a child scope that is closed at once if it fails, so a
 * failed attempt (its server, its temp dir) is gone before the next one.
 * (Used by s3.ts too; a candidate for process.ts.)
 */
export const releasedOnFailure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const own = yield* Scope.fork(yield* Effect.scope)
    return yield* effect.pipe(Scope.provide(own), Effect.onError(() => Scope.close(own, Exit.void)))
  })

const tempDir = (prefix: string, owner: OsUser | undefined) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
        if (owner !== undefined) await fs.chown(dir, owner.uid, owner.gid)
        return dir
      },
      catch: fail("cannot create a temp dir")
    }),
    (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
  )

/** Creates (or reuses) the cluster in `dataDir`, owned by the server's OS user. */
const prepareCluster = Effect.fn("postgres.prepareCluster")(function*(
  bin: string,
  dataDir: string,
  owner: OsUser | undefined
) {
  const pgdata = path.join(dataDir, "pgdata")
  const passwordFile = path.join(dataDir, "password")
  const exists = yield* Effect.promise(() => fs.access(path.join(pgdata, "PG_VERSION")).then(() => true, () => false))
  if (exists) {
    const password = yield* Effect.tryPromise({
      try: () => fs.readFile(passwordFile, "utf8"),
      catch: fail(`${dataDir} holds a cluster but no password file`)
    })
    return { pgdata, password: password.trim() }
  }
  const password = randomBytes(18).toString("hex")
  yield* Effect.tryPromise({
    try: async () => {
      await fs.mkdir(path.dirname(dataDir), { recursive: true })
      await fs.mkdir(dataDir, { recursive: true, mode: 0o700 })
      await fs.writeFile(passwordFile, `${password}\n`, { mode: 0o600 })
      if (owner !== undefined) {
        await fs.chown(dataDir, owner.uid, owner.gid)
        await fs.chown(passwordFile, owner.uid, owner.gid)
      }
    },
    catch: fail(`cannot prepare ${dataDir}`)
  })
  yield* runCommand(path.join(bin, "initdb"), [
    "-D", pgdata, "-U", USERNAME, `--pwfile=${passwordFile}`, "--auth-local=scram-sha-256",
    "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions"
  ], { ...owner, cwd: dataDir, timeoutMs: 60_000 }).pipe(Effect.mapError((error) =>
    new PostgresError({
      message: `initdb failed: ${error.output || error.message}` +
        (owner === undefined ? "" : `\n(the ${USERNAME} OS user must be able to reach ${dataDir})`),
      cause: error
    })
  ))
  return { pgdata, password }
})

const serverArgs = (pgdata: string, port: number, durable: boolean) => [
  "-D", pgdata, "-p", String(port),
  "-c", "listen_addresses=127.0.0.1",
  // No Unix socket: nothing uses it, and long data-dir paths would exceed its length limit.
  "-c", "unix_socket_directories=",
  "-c", "max_connections=200",
  ...(durable ? [] : ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
]

const ensureDatabase = (bin: string, port: number, password: string, database: string) =>
  Effect.gen(function*() {
    const env = { ...process.env, PGPASSWORD: password, PGCONNECT_TIMEOUT: "10" }
    const common = ["-h", "127.0.0.1", "-p", String(port), "-U", USERNAME]
    // The name was checked against a strict pattern, so it is safe inline.
    const found = yield* runCommand(path.join(bin, "psql"), [
      ...common, "-d", "postgres", "-tA", "-c", `SELECT 1 FROM pg_database WHERE datname = '${database}'`
    ], { env, timeoutMs: 30_000 })
    if (found.trim() !== "1") yield* runCommand(path.join(bin, "createdb"), [...common, database], { env, timeoutMs: 30_000 })
  })

/** Starts a private PostgreSQL; stops it (and removes a temp data dir) when the scope closes. */
export const startPostgres = (
  options: PostgresOptions = {}
): Effect.Effect<PostgresServer, PostgresError | ProcessError, Scope.Scope> =>
  Effect.gen(function*() {
    const database = options.database ?? "grove"
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(database)) {
      return yield* new PostgresError({ message: `invalid database name ${JSON.stringify(database)}` })
    }
    const { version, bin } = yield* findPostgresBin
    // PostgreSQL refuses to run as root: run it as the `postgres` OS user then.
    const owner = process.getuid?.() === 0 ? yield* osUser(USERNAME) : undefined
    const durable = options.durable ?? false
    const temporary = options.dataDir === undefined

    const attempt = releasedOnFailure(Effect.gen(function*() {
      const dataDir = options.dataDir === undefined ? yield* tempDir("grove-pg-", owner) : path.resolve(options.dataDir)
      const { pgdata, password } = yield* prepareCluster(bin, dataDir, owner)
      const port = options.port ?? (yield* freePort())
      const server = yield* spawnServer({
        name: "postgres",
        command: path.join(bin, "postgres"),
        args: serverArgs(pgdata, port, durable),
        cwd: dataDir,
        logFile: options.logFile,
        ...owner,
        // SIGINT is PostgreSQL's "fast" shutdown: it does not wait for clients to disconnect.
        stopSignal: "SIGINT",
        // If this process dies abruptly, the guard still removes a temp cluster.
        ...(temporary ? { removeAfterExit: dataDir } : {})
      })
      yield* server.waitForLine((line) => line.includes("ready to accept connections"), 30_000)
      yield* ensureDatabase(bin, port, password, database)
      return {
        url: `postgres://${USERNAME}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
        host: "127.0.0.1",
        port,
        database,
        username: USERNAME,
        password,
        dataDir,
        version,
        pid: server.pid
      }
    }))
    // A free port can be taken between the probe and the bind: try again on another one.
    return yield* options.port === undefined ? Effect.retry(attempt, { times: 2 }) : attempt
  }).pipe(Effect.withSpan("infra.startPostgres"))

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      port: { type: "string" },
      "data-dir": { type: "string" },
      database: { type: "string" },
      durable: { type: "boolean" }
    }
  })
  const started = Date.now()
  Effect.scoped(Effect.gen(function*() {
    const server = yield* startPostgres({
      port: values.port === undefined ? undefined : Number(values.port),
      dataDir: values["data-dir"],
      database: values.database,
      durable: values.durable
    })
    yield* Effect.sync(() => {
      console.log(`PostgreSQL ${server.version} ready in ${Date.now() - started} ms (Ctrl-C stops it)`)
      console.log(`GROVE_DATABASE_URL=${server.url}`)
    })
    return yield* Effect.never
  })).pipe(NodeRuntime.runMain)
}
