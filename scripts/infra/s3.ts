/**
 * A private S3-compatible server: MinIO, built once from the Go module proxy
 * into a cache dir, run as a foreground child bound to 127.0.0.1, with a
 * bucket created.
 *
 * Why MinIO rather than s3rver: it verifies SigV4, decodes the SDK's default
 * aws-chunked uploads, implements multipart fully and honours conditional
 * writes (`If-None-Match: *`), which the object store relies on. The cost is a
 * one-time build (up to about 16 min on 2 shared cores, cold; progress every 30 s), cached under
 * `$GROVE_CACHE_DIR` (default `~/.cache/grove`, outside any clone, so every clone reuses it; Go keeps its
 * module and build caches in the home directory too); set `GROVE_MINIO_BIN` to use a prebuilt binary.
 *
 * As a resource: `startS3()` inside a Scope. As a CLI, in the foreground until SIGINT/SIGTERM:
 *   npx node scripts/infra/s3.ts [--port 9000] [--data-dir ./.grove-data/s3] [--bucket grove]
 *   npx node scripts/infra/s3.ts --build-only      (fill the cache, e.g. in a CI setup step)
 */
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3"
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Schema } from "effect"
import type { Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { releasedOnFailure } from "./postgres.ts"
import { freePort, type ProcessError, runCommand, spawnServer } from "./process.ts"

export class S3ServerError extends Schema.TaggedError<S3ServerError>()("S3ServerError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

export const MINIO_MODULE = "github.com/minio/minio"
/** The last commit published to the module proxy (2026-02-12); MinIO tags are not semver, hence a pseudo-version. */
export const MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"

export interface S3Options {
  /** A fixed port; by default a free one. */
  readonly port?: number | undefined
  /** A directory to keep the objects in (reused across runs); by default a temp dir removed at the end. */
  readonly dataDir?: string | undefined
  /** Default `grove`. */
  readonly bucket?: string | undefined
  /** Also write the server's output to this file (truncated at start). */
  readonly logFile?: string | undefined
}

export interface S3Server {
  /** `http://127.0.0.1:<port>`; use path-style addressing. */
  readonly endpoint: string
  readonly port: number
  readonly region: string
  readonly accessKeyId: string
  readonly secretAccessKey: string
  readonly bucket: string
  readonly dataDir: string
  /** The server's pid. */
  readonly pid: number
}

const REGION = "us-east-1"

const fail = (message: string) => (cause: unknown) => new S3ServerError({ message, cause })

const exists = (file: string) => fs.access(file, fs.constants.X_OK).then(() => true, () => false)

export const cacheDir = (): string => process.env.GROVE_CACHE_DIR ?? path.join(os.homedir(), ".cache", "grove")

/**
 * The MinIO binary: `GROVE_MINIO_BIN`, else the cached build, else built now
 * with `go install` under a file lock (concurrent callers wait for one build).
 */
export const ensureMinio: Effect.Effect<string, S3ServerError> = Effect.gen(function*() {
  const override = process.env.GROVE_MINIO_BIN
  if (override !== undefined && override !== "") return override
  const dir = path.join(cacheDir(), "minio", MINIO_VERSION)
  const bin = path.join(dir, "minio")
  if (yield* Effect.promise(() => exists(bin))) return bin

  yield* Effect.tryPromise({ try: () => fs.mkdir(dir, { recursive: true }), catch: fail(`cannot create ${dir}`) })
  const go = (yield* Effect.promise(() => exists("/usr/local/go/bin/go"))) ? "/usr/local/go/bin/go" : "go"
  yield* Effect.sync(() =>
    console.error(`building MinIO ${MINIO_VERSION} into ${dir}: once, then cached (up to about 16 minutes on 2 cores)...`)
  )
  const started = Date.now()
  // The build prints nothing for minutes: say it is still going.
  const progress = Effect.sync(() =>
    console.error(`still building MinIO (${Math.round((Date.now() - started) / 1000)} s so far; cached in ${cacheDir()} afterwards)...`)
  ).pipe(Effect.delay("30 seconds"), Effect.forever)
  // Built into a private GOBIN and renamed, so a half-built binary is never at `bin`.
  const script = `[ -x "$1" ] || { rm -rf "$2" && GOBIN="$2" "$3" install -trimpath -ldflags="-s -w" "$4" && mv "$2/minio" "$1" && rmdir "$2"; }`
  yield* runCommand("flock", [
    path.join(dir, ".lock"), "bash", "-c", script, "build-minio", bin, path.join(dir, "gobin"), go,
    `${MINIO_MODULE}@${MINIO_VERSION}`
  ], {
    env: { ...process.env, GOFLAGS: "-mod=mod -buildvcs=false", CGO_ENABLED: "0" },
    timeoutMs: 30 * 60_000
  }).pipe(
    Effect.mapError((error) => new S3ServerError({ message: `building MinIO failed (is Go >= 1.24 installed?):\n${error.output}`, cause: error })),
    Effect.raceFirst(progress)
  )
  yield* Effect.sync(() => console.error(`MinIO ready at ${bin} (${Math.round((Date.now() - started) / 1000)} s)`))
  return bin
})

interface Credentials {
  readonly accessKeyId: string
  readonly secretAccessKey: string
}

/** MinIO encrypts its config with the root credentials, so a reused data dir keeps its own. */
const loadCredentials = (dataDir: string) =>
  Effect.tryPromise({
    try: async () => {
      const file = path.join(dataDir, "credentials.json")
      const saved = await fs.readFile(file, "utf8").then((text) => JSON.parse(text) as Credentials, () => undefined)
      if (saved !== undefined) return saved
      const fresh: Credentials = {
        accessKeyId: `grove${randomBytes(6).toString("hex")}`,
        secretAccessKey: randomBytes(24).toString("hex")
      }
      await fs.mkdir(path.join(dataDir, "data"), { recursive: true })
      await fs.writeFile(file, JSON.stringify(fresh, null, 2), { mode: 0o600 })
      return fresh
    },
    catch: fail(`cannot prepare ${dataDir}`)
  })

/** Whether something accepts connections on 127.0.0.1:port. */
const portInUse = (port: number): Effect.Effect<boolean> =>
  Effect.callback((resume) => {
    const socket = net.connect({ host: "127.0.0.1", port })
    const done = (inUse: boolean) => {
      socket.destroy()
      resume(Effect.succeed(inUse))
    }
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
    return Effect.sync(() => socket.destroy())
  })

const createBucket = (endpoint: string, bucket: string, credentials: Credentials) =>
  Effect.tryPromise({
    try: async () => {
      const client = new S3Client({ endpoint, region: REGION, forcePathStyle: true, credentials })
      try {
        await client.send(new CreateBucketCommand({ Bucket: bucket })).catch((error: unknown) => {
          const name = error instanceof Error ? error.name : ""
          if (name !== "BucketAlreadyOwnedByYou" && name !== "BucketAlreadyExists") throw error
        })
      } finally {
        client.destroy()
      }
    },
    catch: fail(`cannot create the bucket ${bucket}`)
  })

/** Starts a private MinIO with a bucket; stops it (and removes a temp data dir) when the scope closes. */
export const startS3 = (options: S3Options = {}): Effect.Effect<S3Server, S3ServerError | ProcessError, Scope.Scope> =>
  Effect.gen(function*() {
    const bucket = options.bucket ?? "grove"
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
      return yield* new S3ServerError({ message: `invalid bucket name ${JSON.stringify(bucket)}` })
    }
    const bin = yield* ensureMinio
    const temporary = options.dataDir === undefined

    const attempt = releasedOnFailure(Effect.gen(function*() {
      const dataDir = options.dataDir === undefined
        ? yield* Effect.acquireRelease(
          Effect.tryPromise({ try: () => fs.mkdtemp(path.join(os.tmpdir(), "grove-s3-")), catch: fail("cannot create a temp dir") }),
          (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
        )
        : path.resolve(options.dataDir)
      const credentials = yield* loadCredentials(dataDir)
      const port = options.port ?? (yield* freePort())
      // MinIO binds with SO_REUSEPORT: on a taken port it would start and share it rather than fail.
      if (yield* portInUse(port)) return yield* new S3ServerError({ message: `port ${port} on 127.0.0.1 is already in use` })
      const server = yield* spawnServer({
        name: "minio",
        command: bin,
        args: ["server", "--address", `127.0.0.1:${port}`, "--quiet", "--anonymous", path.join(dataDir, "data")],
        cwd: dataDir,
        env: {
          ...process.env,
          MINIO_ROOT_USER: credentials.accessKeyId,
          MINIO_ROOT_PASSWORD: credentials.secretAccessKey,
          MINIO_BROWSER: "off",
          MINIO_UPDATE: "off",
          MINIO_SITE_REGION: REGION
        },
        logFile: options.logFile,
        // If this process dies abruptly, the guard still removes a temp data dir.
        ...(temporary ? { removeAfterExit: dataDir } : {})
      })
      const endpoint = `http://127.0.0.1:${port}`
      const healthy = Effect.promise(() =>
        fetch(`${endpoint}/minio/health/ready`).then((response) => response.ok, () => false)
      )
      yield* server.waitUntil(healthy, 60_000, 50)
      yield* createBucket(endpoint, bucket, credentials)
      return { endpoint, port, region: REGION, ...credentials, bucket, dataDir, pid: server.pid }
    }))
    // A free port can be taken between the probe and the bind: try again on another one.
    return yield* options.port === undefined ? Effect.retry(attempt, { times: 2 }) : attempt
  }).pipe(Effect.withSpan("infra.startS3"))

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      port: { type: "string" },
      "data-dir": { type: "string" },
      bucket: { type: "string" },
      "build-only": { type: "boolean" }
    }
  })
  const started = Date.now()
  const main = values["build-only"] === true
    ? Effect.flatMap(ensureMinio, (bin) => Effect.sync(() => console.log(bin)))
    : Effect.scoped(Effect.gen(function*() {
      const server = yield* startS3({
        port: values.port === undefined ? undefined : Number(values.port),
        dataDir: values["data-dir"],
        bucket: values.bucket
      })
      yield* Effect.sync(() => {
        console.log(`MinIO ready in ${Date.now() - started} ms (Ctrl-C stops it)`)
        console.log(`GROVE_S3_ENDPOINT=${server.endpoint}`)
        console.log(`GROVE_S3_REGION=${server.region}`)
        console.log(`GROVE_S3_BUCKET=${server.bucket}`)
        console.log(`GROVE_S3_ACCESS_KEY_ID=${server.accessKeyId}`)
        console.log(`GROVE_S3_SECRET_ACCESS_KEY=${server.secretAccessKey}`)
      })
      return yield* Effect.never
    }))
  main.pipe(NodeRuntime.runMain)
}
