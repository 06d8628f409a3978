/**
 * `grove-server`: `serve` runs the server (embedded by default); `user create`
 * and `user passwd` manage users whether or not a server is running; `migrate`
 * applies the database migrations.
 */
import { ConfigError, parseConfig } from "./Config.ts"
import { freePort, listenProblem } from "./net.ts"

const USAGE = `grove-server — the Grove repository hosting server

Usage:
  grove-server serve [options]              run the server (default command)
  grove-server user create <name> [--admin] [--password-stdin] [options]
                                            create a user and its personal organization;
                                            prints a new personal API key as the last line
  grove-server user passwd <name> [options]  set the password for browser sign-in (read from stdin)
  grove-server migrate [options]            apply the pending database migrations (before an upgrade's rollout)
  grove-server fsck [--json] [--concurrency N] [options]
                                            check that every reference resolves to a stored object and every
                                            object hashes to its name; exit 1 on any problem
  grove-server gc [--dry-run] [--json] [options]
                                            one garbage collection and retention run, and what it freed
                                            (embedded: with the server stopped; it also runs on its own)

Options (each also read from the environment variable in brackets):
  --mode embedded|cluster       [GROVE_MODE]          default embedded
  --host HOST                   [GROVE_HOST]          default 127.0.0.1
  --port PORT                   [GROVE_PORT]          default 8080 (0 picks a free port)
  --data-dir DIR                [GROVE_DATA_DIR]      default ./.grove-data
  --site-url URL                [GROVE_SITE_URL]      default http://HOST:PORT
  --node-id ID                  [GROVE_NODE_ID]       default host-pid-random
  --kafka-brokers H:P,...       [GROVE_KAFKA_BROKERS] cluster mode
  --kafka-prefix PREFIX         [GROVE_KAFKA_PREFIX]  prepended to topic and group names (share a broker)
  --kafka-session-timeout-ms MS [GROVE_KAFKA_SESSION_TIMEOUT_MS] default 3000 (1000 to 1800000);
                                a dead node's partitions move this long after its last heartbeat
                                (a stock broker's group.min.session.timeout.ms is 6000)
  --database-url URL            [GROVE_DATABASE_URL]  cluster mode (postgres://...)
  --s3-endpoint URL             [GROVE_S3_ENDPOINT]   cluster mode
  --s3-region, --s3-bucket, --s3-access-key-id, --s3-secret-access-key
  --command-timeout-ms MS       [GROVE_COMMAND_TIMEOUT_MS] default 10000
  --org-quota-bytes N           [GROVE_ORG_QUOTA_BYTES] every organization's storage quota (default: 10 GiB each)
  --secret-key-file FILE        [GROVE_SECRET_KEY_FILE] the key encrypting CI secrets (or GROVE_SECRET_KEY, base64 of
                                32 bytes; embedded mode generates DATA_DIR/secret.key; required in cluster mode)
  --ci-concurrency N            [GROVE_CI_CONCURRENCY] CI runs this node executes at once (default 2)
  --ci-queue-limit N            [GROVE_CI_QUEUE_LIMIT] queued runs before manual starts answer 503 (default 100)
  --ci-step-output-limit-bytes N [GROVE_CI_STEP_OUTPUT_LIMIT_BYTES] output kept per step (default 1 MiB)
  --ci-job-timeout-minutes N    [GROVE_CI_JOB_TIMEOUT_MINUTES] default job timeout (default 60)
  --ci-work-dir DIR             [GROVE_CI_WORK_DIR]   where jobs run (default $TMPDIR/grove-ci)
  --ci-user USER                [GROVE_CI_USER]       who steps are inside their sandbox (default nobody)
  --ci-uid-base N               [GROVE_CI_UID_BASE]   as root, each running job's own host uid is in N..N+65535 (default 200000)
  --ci-unsafe-shared-runner     [GROVE_CI_UNSAFE_SHARED_RUNNER] without bubblewrap, run steps unsandboxed on the host
                                (otherwise this node starts no CI runners)
  --dns-servers IP[:PORT],...   [GROVE_DNS_SERVERS]   resolvers for outbound calls (default: the system's)
  --webhook-concurrency N       [GROVE_WEBHOOK_CONCURRENCY] deliveries this node makes at once (default 32)
  --webhook-retry-base-ms MS    [GROVE_WEBHOOK_RETRY_BASE_MS] first retry delay, doubling up to an hour (default 10000)
  --webhook-allow NET|HOST,...  [GROVE_WEBHOOK_ALLOW] networks (10.0.0.0/8, 192.168.1.5) and host names (hooks.corp,
                                *.corp.example) webhooks may reach although not public (default: none)
  --gc-grace-seconds S          [GROVE_GC_GRACE_SECONDS] unreferenced content is marked, then freed, after this (default 3600)
  --gc-interval-seconds S       [GROVE_GC_INTERVAL_SECONDS] the server's own gc run (default 21600; 0: off)
  --retention-ci-logs-days D    [GROVE_RETENTION_CI_LOGS_DAYS] prune CI log pieces of runs finished longer ago
  --retention-ci-caches-days D  [GROVE_RETENTION_CI_CACHES_DAYS] prune CI caches not written for longer
  --retention-webhook-deliveries-days D [GROVE_RETENTION_WEBHOOK_DELIVERIES_DAYS] prune finished deliveries
                                older than this, with their attempts (each retention: default keep forever)
  --metrics-token TOKEN         [GROVE_METRICS_TOKEN] the bearer token GET /metrics requires (default: /metrics off)
  --shutdown-delay-ms MS        [GROVE_SHUTDOWN_DELAY_MS] on SIGTERM, serve this long with /readyz at 503 (default 0)
  --drain-timeout-ms MS         [GROVE_DRAIN_TIMEOUT_MS] then let in-flight requests and commands finish this long (default 5000)
  --migrations auto|wait        [GROVE_MIGRATIONS]    apply migrations at start, or wait for grove-server migrate
  --log-format json|text        [GROVE_LOG_FORMAT]    default json when stdout is not a terminal
  --otlp-endpoint URL           [GROVE_OTLP_ENDPOINT] send OpenTelemetry traces to this OTLP/HTTP collector (JSON to
                                URL/v1/traces; OTEL_EXPORTER_OTLP_ENDPOINT is honoured too; default: tracing off)
`

const fail = (message: string, code: number): never => {
  process.stderr.write(`grove-server: ${message}\n`)
  process.exit(code)
}

const main = async () => {
  const [command = "serve", ...rest] = process.argv.slice(2)
  if (command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(USAGE)
    return
  }
  if (command === "migrate") {
    const { runMigrateCommand } = await import("./admin/MigrateCommand.ts")
    process.exitCode = await runMigrateCommand(rest)
    return
  }
  if (command === "gc") {
    const { runGcCommand } = await import("./admin/GcCommand.ts")
    process.exitCode = await runGcCommand(rest)
    return
  }
  if (command === "fsck") {
    const { runFsckCommand } = await import("./admin/FsckCommand.ts")
    process.exitCode = await runFsckCommand(rest)
    return
  }
  if (command === "user") {
    // Imported on demand: each command loads only what it needs.
    const { runUserCommand } = await import("./admin/UserCommand.ts")
    process.exitCode = await runUserCommand(rest)
    return
  }
  if (command !== "serve") return fail(`unknown command ${command}\n\n${USAGE}`, 2)
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(USAGE)
    return
  }
  let config
  try {
    config = parseConfig(rest, process.env)
  } catch (error) {
    return fail(error instanceof ConfigError ? error.message : String(error), 2)
  }
  if (config.port === 0) {
    const port = await freePort(config.host)
    config = parseConfig([...rest, "--port", String(port)], process.env)
  }
  // The two mistakes of a second start are named at once, in one line, before anything loads.
  const listening = `${config.host}:${config.port}`
  const busy = config.mode === "embedded" ? (await import("./admin/DataDirLock.ts")).holder(config.dataDir) : undefined
  if (busy !== undefined) return fail(dataDirBusy(config.dataDir, busy), 1)
  const problem = await listenProblem(config.host, config.port)
  if (problem !== undefined) return fail(cannotListen(listening, problem.code ?? problem.message), 1)
  // Loaded only now: --help, the admin commands and the checks above need none of the server.
  const { launch } = await import("./Launch.ts")
  launch(config, {
    dataDirBusy: (pid) => fail(dataDirBusy(config.dataDir, pid), 1),
    schemaTooNew: (message) => fail(message, 1),
    cannotListen: (code) => fail(cannotListen(listening, code), 1)
  })
}

const dataDirBusy = (dataDir: string, pid: number) =>
  `the data directory ${dataDir} is in use by another grove-server (pid ${pid}): stop it, or start with another --data-dir`

const cannotListen = (address: string, code: string) =>
  code === "EADDRINUSE"
    ? `cannot listen on ${address}: the address is in use (another grove-server?): stop it, or start with another --port`
    : `cannot listen on ${address}: ${code}`

await main()
