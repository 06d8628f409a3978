/**
 * Server configuration from flags and environment (flags win). Every setting
 * is documented in the README's configuration table.
 */
import { Context, Result } from "effect"
import { isIpLiteral } from "@grove/core/net/PublicAddress"
import { IpNetwork } from "effect/net"
import { randomBytes } from "node:crypto"
import { hostname, tmpdir } from "node:os"
import * as path from "node:path"
import { parseAllowList } from "@grove/core/net/AllowList"
import { type CiConfig, DEFAULT_CI, DEFAULT_GC, DEFAULT_RELEASE_MAX_BYTES, type GcConfig, type ReleaseConfig } from "./FeatureConfig.ts"

export * from "./FeatureConfig.ts"


/** Event streams open at once, per caller and per node (events/StreamSlots.ts), unless configured. */
export const DEFAULT_STREAM_LIMITS = { perCaller: 20, perNode: 1000 } as const

/** Every event stream re-checks its caller's access this often too, in case an access event was missed. */
export const DEFAULT_RECHECK_MS = 60_000

export type Mode = "embedded" | "cluster"

export interface ServerConfigShape {
  readonly mode: Mode
  readonly host: string
  readonly port: number
  /** The public root URL; `{base_url}` is this plus `/api`. */
  readonly siteUrl: string
  readonly dataDir: string
  readonly nodeId: string
  readonly kafkaBrokers: ReadonlyArray<string>
  /** Prepended to every Kafka topic and consumer group, so deployments can share a broker. */
  readonly kafkaPrefix: string
  /**
   * The Kafka consumer groups' session timeout: a node that stops heartbeating (killed, frozen,
   * cut off) loses its partitions after this long, which bounds how soon another node takes them.
   */
  readonly kafkaSessionTimeoutMs: number
  readonly databaseUrl: string | undefined
  readonly s3: {
    readonly endpoint: string | undefined
    readonly region: string
    readonly bucket: string
    readonly accessKeyId: string | undefined
    readonly secretAccessKey: string | undefined
  }
  /** How long a write waits for its entity command before answering 202 with an operation id. */
  readonly commandTimeoutMs: number
  /** When set, every organization's storage quota in bytes (applied at start); otherwise each keeps its own (default 10 GiB). */
  readonly orgQuotaBytes: number | undefined
  /**
   * Proxies (CIDR networks) whose `X-Forwarded-For` names the client, for the sign-in throttle;
   * from any other peer the header is ignored. Empty or absent: the transport peer is the client.
   */
  readonly trustedProxies?: ReadonlyArray<string> | undefined
  /**
   * The server key (32 bytes) that encrypts CI secrets at rest: from `GROVE_SECRET_KEY` (base64) or
   * the file `--secret-key-file` names; embedded mode generates `<data dir>/secret.key` when neither is set.
   */
  readonly secretKey?: Uint8Array | undefined
  readonly secretKeyFile?: string | undefined
  readonly ci?: CiConfig | undefined
  /**
   * Exact addresses outbound calls may reach although they are not public: for tests with a
   * receiver on 127.0.0.1. From `GROVE_UNSAFE_EGRESS_ALLOW` only (no flag), warned about at start.
   */
  readonly egressAllow?: ReadonlyArray<string> | undefined
  /**
   * Networks (CIDR or one address) and host names (`name`, `*.suffix`) webhooks may reach although they are
   * not public (`--webhook-allow`, like Gitea's ALLOWED_HOST_LIST); empty by default. See packages/core/src/net/AllowList.ts.
   */
  readonly webhookAllow?: ReadonlyArray<string> | undefined
  /** DNS servers (`ip` or `ip:port`) outbound calls resolve names with; the system's resolver when empty. */
  readonly dnsServers?: ReadonlyArray<string> | undefined
  /** Webhook deliveries this node makes at once (one at a time per webhook). */
  readonly webhookConcurrency?: number | undefined
  /** The first retry of a failed delivery waits about this long; each next one twice as long (up to an hour). */
  readonly webhookRetryBaseMs?: number | undefined
  /** Event streams (`…/events`) one caller (a user, a service account, an anonymous address) may hold open on a node. */
  readonly eventStreamsPerCaller?: number | undefined
  /** Event streams open on a node, all callers together. */
  readonly eventStreamsPerNode?: number | undefined
  /** How often an open event stream re-checks its caller's access besides at every access event. */
  readonly eventStreamRecheckMs?: number | undefined
  /** The bearer token `/metrics` requires; without one `/metrics` answers 404 (ops/OpsRoutes.ts). */
  readonly metricsToken?: string | undefined
  /** On SIGTERM, how long the node keeps serving with `/readyz` at 503 before its listener closes (ops/Drain.ts). */
  readonly shutdownDelayMs?: number | undefined
  /**
   * On SIGTERM, once the listener closes: how long in-flight requests, and the entity commands in hand,
   * may take to finish before they are cut (http/DrainingServer.ts, the bus's partition workers).
   */
  readonly drainTimeoutMs?: number | undefined
  /** `auto`: apply pending migrations at start; `wait`: wait for `grove-server migrate`. */
  readonly migrations?: "auto" | "wait" | undefined
  /** Log lines as JSON objects or readable text (ops/Logging.ts); JSON when stdout is not a terminal. */
  readonly logFormat?: "json" | "text" | undefined
  /** Garbage collection and retention (housekeeping/GcRun.ts); DEFAULT_GC when absent. */
  readonly gc?: GcConfig | undefined
  /** Client releases (releases/): who may publish, the minisign key that signs, the largest binary. */
  readonly release?: ReleaseConfig | undefined
  /** Organization sites (sites/) are also served at `<org>.<sitesDomain>` (a host name, no scheme or port). */
  readonly sitesDomain?: string | undefined
  /** Where traces go (an OTLP/HTTP traces URL, ops/Tracing.ts); unset: tracing is off. */
  readonly otlpTracesUrl?: string | undefined
  /** Hot reads answered before the Effect app when all they need is cached (fast-reads/); on unless `GROVE_FAST_READS=0`. */
  readonly fastReads?: boolean | undefined
  /** Headers every trace export carries (`OTEL_EXPORTER_OTLP_HEADERS`, `k=v,k2=v2`), e.g. a vendor's key. */
  readonly otlpHeaders?: Readonly<Record<string, string>> | undefined
}

export class ServerConfig extends Context.Service<ServerConfig, ServerConfigShape>()("grove/server/ServerConfig") {}

export class ConfigError extends Error {}

const FLAG_TO_ENV: Record<string, string> = {
  "--host": "GROVE_HOST",
  "--port": "GROVE_PORT",
  "--data-dir": "GROVE_DATA_DIR",
  "--mode": "GROVE_MODE",
  "--site-url": "GROVE_SITE_URL",
  "--node-id": "GROVE_NODE_ID",
  "--kafka-brokers": "GROVE_KAFKA_BROKERS",
  "--kafka-prefix": "GROVE_KAFKA_PREFIX",
  "--kafka-session-timeout-ms": "GROVE_KAFKA_SESSION_TIMEOUT_MS",
  "--database-url": "GROVE_DATABASE_URL",
  "--s3-endpoint": "GROVE_S3_ENDPOINT",
  "--s3-region": "GROVE_S3_REGION",
  "--s3-bucket": "GROVE_S3_BUCKET",
  "--s3-access-key-id": "GROVE_S3_ACCESS_KEY_ID",
  "--s3-secret-access-key": "GROVE_S3_SECRET_ACCESS_KEY",
  "--command-timeout-ms": "GROVE_COMMAND_TIMEOUT_MS",
  "--org-quota-bytes": "GROVE_ORG_QUOTA_BYTES",
  "--trusted-proxies": "GROVE_TRUSTED_PROXIES",
  "--secret-key-file": "GROVE_SECRET_KEY_FILE",
  "--ci-concurrency": "GROVE_CI_CONCURRENCY",
  "--ci-queue-limit": "GROVE_CI_QUEUE_LIMIT",
  "--ci-step-output-limit-bytes": "GROVE_CI_STEP_OUTPUT_LIMIT_BYTES",
  "--ci-job-timeout-minutes": "GROVE_CI_JOB_TIMEOUT_MINUTES",
  "--ci-work-dir": "GROVE_CI_WORK_DIR",
  "--ci-user": "GROVE_CI_USER",
  "--ci-uid-base": "GROVE_CI_UID_BASE",
  "--ci-unsafe-shared-runner": "GROVE_CI_UNSAFE_SHARED_RUNNER",
  "--dns-servers": "GROVE_DNS_SERVERS",
  "--webhook-allow": "GROVE_WEBHOOK_ALLOW",
  "--webhook-concurrency": "GROVE_WEBHOOK_CONCURRENCY",
  "--webhook-retry-base-ms": "GROVE_WEBHOOK_RETRY_BASE_MS",
  "--event-streams-per-caller": "GROVE_EVENT_STREAMS_PER_CALLER",
  "--event-streams-per-node": "GROVE_EVENT_STREAMS_PER_NODE",
  "--event-stream-recheck-ms": "GROVE_EVENT_STREAM_RECHECK_MS",
  "--metrics-token": "GROVE_METRICS_TOKEN",
  "--shutdown-delay-ms": "GROVE_SHUTDOWN_DELAY_MS",
  "--drain-timeout-ms": "GROVE_DRAIN_TIMEOUT_MS",
  "--migrations": "GROVE_MIGRATIONS",
  "--log-format": "GROVE_LOG_FORMAT",
  "--gc-grace-seconds": "GROVE_GC_GRACE_SECONDS",
  "--gc-interval-seconds": "GROVE_GC_INTERVAL_SECONDS",
  "--retention-ci-logs-days": "GROVE_RETENTION_CI_LOGS_DAYS",
  "--retention-ci-caches-days": "GROVE_RETENTION_CI_CACHES_DAYS",
  "--retention-webhook-deliveries-days": "GROVE_RETENTION_WEBHOOK_DELIVERIES_DAYS",
  "--release-org": "GROVE_RELEASE_ORG",
  "--release-signing-key-file": "GROVE_RELEASE_SIGNING_KEY_FILE",
  "--release-max-bytes": "GROVE_RELEASE_MAX_BYTES",
  "--sites-domain": "GROVE_SITES_DOMAIN",
  "--otlp-endpoint": "GROVE_OTLP_ENDPOINT"
}

export const FLAGS = Object.keys(FLAG_TO_ENV)
/** Flags that take no value (`--flag` alone means true; `--flag=false` is allowed). */
const SWITCHES = new Set(["--ci-unsafe-shared-runner"])

/**
 * The default Kafka session timeout, for `npm run cluster` and the test suites alike (neither
 * sets it). With it a killed node's partitions move 2-4 s after the kill, plus the claim: the
 * broker expires the member one session timeout after its last heartbeat, the survivor hears of
 * the rebalance at its next heartbeat (every third of the timeout, see `KafkaBus`), rejoins and
 * claims them. A live node is taken for dead only when it misses three heartbeats in a row, i.e.
 * its event loop or network stalls for 3 s. Kafka's client default is 45 s; a stock broker
 * accepts 6 s to 30 min (`group.min.session.timeout.ms` / `group.max.session.timeout.ms`),
 * scripts/infra/kafka's broker down to 1 s. Against a stock broker, set 6000 or more, or lower
 * its minimum.
 */
export const DEFAULT_KAFKA_SESSION_TIMEOUT_MS = 3000

/** Below 1 s a busy node would lose its partitions to a garbage collection; 30 min is a stock broker's maximum. */
const KAFKA_SESSION_TIMEOUT_RANGE = { min: 1000, max: 1_800_000 } as const

/**
 * The OTLP/HTTP traces URL: `GROVE_OTLP_ENDPOINT` (a collector's base URL, `/v1/traces` appended unless
 * given), else OpenTelemetry's own `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (a base); none, or `OTEL_SDK_DISABLED=true`: tracing is off.
 */
const otlpTracesUrl = (grove: string | undefined, env: NodeJS.ProcessEnv): string | undefined => {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined
  const full = grove === undefined ? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT : undefined
  const base = grove ?? env.OTEL_EXPORTER_OTLP_ENDPOINT
  const given = (full ?? base)?.trim()
  if (given === undefined || given === "") return undefined
  const name = grove !== undefined ? "GROVE_OTLP_ENDPOINT" : full !== undefined ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT"
  let url: URL
  try {
    url = new URL(given)
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL, not ${JSON.stringify(given)}`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new ConfigError(`${name} must be an http(s) URL, not ${JSON.stringify(given)}`)
  if (full === undefined && !url.pathname.endsWith("/v1/traces")) url.pathname = `${url.pathname.replace(/\/+$/, "")}/v1/traces`
  return url.toString()
}

const otlpHeaders = (value: string | undefined): Record<string, string> | undefined => {
  if (value === undefined || value.trim() === "") return undefined
  const headers: Record<string, string> = {}
  for (const pair of value.split(",")) {
    const at = pair.indexOf("=")
    if (at <= 0) throw new ConfigError("OTEL_EXPORTER_OTLP_HEADERS takes key=value pairs separated by commas")
    headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim())
  }
  return headers
}

/** Reads `--flag value` / `--flag=value` pairs over the environment. Unknown flags are an error. */
export const parseConfig = (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): ServerConfigShape => {
  const values: Record<string, string | undefined> = {}
  for (const name of Object.values(FLAG_TO_ENV)) values[name] = env[name]
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const [flag, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined]
    const name = FLAG_TO_ENV[flag]
    if (name === undefined) throw new ConfigError(`unknown option ${flag} (known: ${FLAGS.join(", ")})`)
    const value = inline ?? (SWITCHES.has(flag) ? "true" : argv[++i])
    if (value === undefined) throw new ConfigError(`option ${flag} needs a value`)
    values[name] = value
  }
  const mode = values.GROVE_MODE ?? "embedded"
  if (mode !== "embedded" && mode !== "cluster") throw new ConfigError(`GROVE_MODE must be embedded or cluster, not ${mode}`)
  const host = values.GROVE_HOST ?? "127.0.0.1"
  const port = Number(values.GROVE_PORT ?? "8080")
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError(`GROVE_PORT must be a port number`)
  const timeout = Number(values.GROVE_COMMAND_TIMEOUT_MS ?? "10000")
  if (!Number.isFinite(timeout) || timeout <= 0) throw new ConfigError(`GROVE_COMMAND_TIMEOUT_MS must be positive`)
  const quota = values.GROVE_ORG_QUOTA_BYTES === undefined ? undefined : Number(values.GROVE_ORG_QUOTA_BYTES)
  if (quota !== undefined && (!Number.isSafeInteger(quota) || quota < 0)) {
    throw new ConfigError("GROVE_ORG_QUOTA_BYTES must be a non-negative whole number of bytes")
  }
  const dataDir = path.resolve(values.GROVE_DATA_DIR ?? "./.grove-data")
  const kafkaPrefix = values.GROVE_KAFKA_PREFIX ?? ""
  if (!/^[A-Za-z0-9._-]{0,100}$/.test(kafkaPrefix)) {
    throw new ConfigError("GROVE_KAFKA_PREFIX may contain only letters, digits, '.', '_' and '-' (at most 100)")
  }
  const sessionTimeout = Number(values.GROVE_KAFKA_SESSION_TIMEOUT_MS ?? String(DEFAULT_KAFKA_SESSION_TIMEOUT_MS))
  if (
    !Number.isSafeInteger(sessionTimeout) || sessionTimeout < KAFKA_SESSION_TIMEOUT_RANGE.min ||
    sessionTimeout > KAFKA_SESSION_TIMEOUT_RANGE.max
  ) {
    throw new ConfigError(
      `GROVE_KAFKA_SESSION_TIMEOUT_MS must be a whole number of milliseconds from ${KAFKA_SESSION_TIMEOUT_RANGE.min} to ${KAFKA_SESSION_TIMEOUT_RANGE.max}`
    )
  }
  const brokers = (values.GROVE_KAFKA_BROKERS ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0)
  if (mode === "cluster") {
    if (brokers.length === 0) throw new ConfigError("cluster mode needs GROVE_KAFKA_BROKERS")
    if (values.GROVE_DATABASE_URL === undefined) throw new ConfigError("cluster mode needs GROVE_DATABASE_URL")
    if (values.GROVE_S3_ENDPOINT === undefined) throw new ConfigError("cluster mode needs GROVE_S3_ENDPOINT")
  }
  const trustedProxies = (values.GROVE_TRUSTED_PROXIES ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0)
  for (const network of trustedProxies) {
    if (Result.isFailure(IpNetwork.fromString(network))) {
      throw new ConfigError(`GROVE_TRUSTED_PROXIES must be comma-separated networks such as 10.0.0.0/8, not ${JSON.stringify(network)}`)
    }
  }
  const positive = (name: string, fallback: number, integer = true) => {
    const raw = values[name]
    if (raw === undefined) return fallback
    const value = Number(raw)
    if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isSafeInteger(value))) {
      throw new ConfigError(`${name} must be a positive ${integer ? "whole " : ""}number`)
    }
    return value
  }
  const switchValue = (name: string) => {
    const raw = (values[name] ?? "false").toLowerCase()
    if (!["true", "1", "false", "0", ""].includes(raw)) throw new ConfigError(`${name} must be true or false`)
    return raw === "true" || raw === "1"
  }
  const ci: CiConfig = {
    concurrency: positive("GROVE_CI_CONCURRENCY", DEFAULT_CI.concurrency),
    queueLimit: positive("GROVE_CI_QUEUE_LIMIT", DEFAULT_CI.queueLimit),
    stepOutputLimitBytes: positive("GROVE_CI_STEP_OUTPUT_LIMIT_BYTES", DEFAULT_CI.stepOutputLimitBytes),
    defaultJobTimeoutMinutes: positive("GROVE_CI_JOB_TIMEOUT_MINUTES", DEFAULT_CI.defaultJobTimeoutMinutes, false),
    workDir: path.resolve(values.GROVE_CI_WORK_DIR ?? path.join(tmpdir(), "grove-ci")),
    runAsUser: values.GROVE_CI_USER ?? DEFAULT_CI.runAsUser,
    uidBase: positive("GROVE_CI_UID_BASE", DEFAULT_CI.uidBase),
    unsafeSharedRunner: switchValue("GROVE_CI_UNSAFE_SHARED_RUNNER")
  }
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(ci.runAsUser)) throw new ConfigError("GROVE_CI_USER must be a user name")
  if (ci.uidBase < 1000 || ci.uidBase + 65_536 > 2 ** 31) throw new ConfigError("GROVE_CI_UID_BASE must be from 1000 to 2147418112 (the range is 65536 ids)")
  // Read from the environment only: a key on the command line would show in the process list.
  const rawKey = env.GROVE_SECRET_KEY
  let secretKey: Uint8Array | undefined
  if (rawKey !== undefined) {
    secretKey = Buffer.from(rawKey, "base64")
    if (secretKey.length !== 32) throw new ConfigError("GROVE_SECRET_KEY must be 32 bytes in base64 (openssl rand -base64 32)")
  }
  if (mode === "cluster" && secretKey === undefined && values.GROVE_SECRET_KEY_FILE === undefined) {
    throw new ConfigError("cluster mode needs GROVE_SECRET_KEY (or --secret-key-file): every node must encrypt CI secrets with the same key")
  }
  const egressAllow = (env.GROVE_UNSAFE_EGRESS_ALLOW ?? "").split(",").map((a) => a.trim()).filter((a) => a.length > 0)
  for (const address of egressAllow) {
    if (!isIpLiteral(address)) throw new ConfigError(`GROVE_UNSAFE_EGRESS_ALLOW takes exact IP addresses (no names, no networks), not ${JSON.stringify(address)}`)
  }
  const webhookAllow = (values.GROVE_WEBHOOK_ALLOW ?? "").split(",").map((a) => a.trim()).filter((a) => a.length > 0)
  const allowList = parseAllowList(webhookAllow)
  if ("invalid" in allowList) {
    throw new ConfigError(`GROVE_WEBHOOK_ALLOW takes networks (10.0.0.0/8, 192.168.1.5) and host names (hooks.corp, *.corp.example), not ${JSON.stringify(allowList.invalid)}`)
  }
  const dnsServers = (values.GROVE_DNS_SERVERS ?? "").split(",").map((a) => a.trim()).filter((a) => a.length > 0)
  for (const server of dnsServers) {
    const match = /^(?:\[([^\]]+)\]|([^:]+))(?::(\d{1,5}))?$/.exec(server)
    if (match === null || !isIpLiteral(match[1] ?? match[2] ?? "")) throw new ConfigError(`GROVE_DNS_SERVERS takes ip or ip:port entries, not ${JSON.stringify(server)}`)
  }
  const metricsToken = values.GROVE_METRICS_TOKEN
  if (metricsToken !== undefined && !/^[\x21-\x7e]{16,256}$/.test(metricsToken)) {
    throw new ConfigError("GROVE_METRICS_TOKEN must be 16 to 256 printable characters without spaces")
  }
  const shutdownDelayMs = Number(values.GROVE_SHUTDOWN_DELAY_MS ?? "0")
  if (!Number.isSafeInteger(shutdownDelayMs) || shutdownDelayMs < 0 || shutdownDelayMs > 600_000) {
    throw new ConfigError("GROVE_SHUTDOWN_DELAY_MS must be a whole number of milliseconds from 0 to 600000")
  }
  const drainTimeoutMs = Number(values.GROVE_DRAIN_TIMEOUT_MS ?? "5000")
  if (!Number.isSafeInteger(drainTimeoutMs) || drainTimeoutMs < 0 || drainTimeoutMs > 600_000) {
    throw new ConfigError("GROVE_DRAIN_TIMEOUT_MS must be a whole number of milliseconds from 0 to 600000")
  }
  const migrations = values.GROVE_MIGRATIONS ?? "auto"
  if (migrations !== "auto" && migrations !== "wait") throw new ConfigError(`GROVE_MIGRATIONS must be auto or wait, not ${migrations}`)
  const logFormat = values.GROVE_LOG_FORMAT ?? (process.stdout.isTTY === true ? "text" : "json")
  if (logFormat !== "json" && logFormat !== "text") throw new ConfigError(`GROVE_LOG_FORMAT must be json or text, not ${logFormat}`)
  const gcInterval = Number(values.GROVE_GC_INTERVAL_SECONDS ?? String(DEFAULT_GC.intervalMs / 1000))
  if (!Number.isFinite(gcInterval) || gcInterval < 0) throw new ConfigError("GROVE_GC_INTERVAL_SECONDS must be 0 (off) or a positive number of seconds")
  const days = (name: string) => values[name] === undefined ? undefined : positive(name, 0, false) * 86_400_000
  const gc: GcConfig = {
    graceMs: positive("GROVE_GC_GRACE_SECONDS", DEFAULT_GC.graceMs / 1000, false) * 1000,
    intervalMs: gcInterval * 1000,
    retention: {
      ciLogsMs: days("GROVE_RETENTION_CI_LOGS_DAYS"),
      ciCachesMs: days("GROVE_RETENTION_CI_CACHES_DAYS"),
      webhookDeliveriesMs: days("GROVE_RETENTION_WEBHOOK_DELIVERIES_DAYS")
    }
  }
  const displayHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host
  return {
    mode,
    host,
    port,
    siteUrl: (values.GROVE_SITE_URL ?? `http://${displayHost}:${port}`).replace(/\/+$/, ""),
    dataDir,
    nodeId: values.GROVE_NODE_ID ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`,
    kafkaBrokers: brokers,
    kafkaPrefix,
    kafkaSessionTimeoutMs: sessionTimeout,
    databaseUrl: values.GROVE_DATABASE_URL,
    s3: {
      endpoint: values.GROVE_S3_ENDPOINT,
      region: values.GROVE_S3_REGION ?? "us-east-1",
      bucket: values.GROVE_S3_BUCKET ?? "grove",
      accessKeyId: values.GROVE_S3_ACCESS_KEY_ID,
      secretAccessKey: values.GROVE_S3_SECRET_ACCESS_KEY
    },
    commandTimeoutMs: timeout,
    metricsToken,
    shutdownDelayMs,
    drainTimeoutMs,
    migrations,
    logFormat,
    gc,
    orgQuotaBytes: quota,
    trustedProxies,
    secretKey,
    secretKeyFile: values.GROVE_SECRET_KEY_FILE,
    ci,
    egressAllow,
    dnsServers,
    webhookAllow,
    webhookConcurrency: positive("GROVE_WEBHOOK_CONCURRENCY", 32),
    webhookRetryBaseMs: positive("GROVE_WEBHOOK_RETRY_BASE_MS", 10_000),
    eventStreamsPerCaller: positive("GROVE_EVENT_STREAMS_PER_CALLER", DEFAULT_STREAM_LIMITS.perCaller),
    eventStreamsPerNode: positive("GROVE_EVENT_STREAMS_PER_NODE", DEFAULT_STREAM_LIMITS.perNode),
    eventStreamRecheckMs: positive("GROVE_EVENT_STREAM_RECHECK_MS", DEFAULT_RECHECK_MS),
    release: {
      org: values.GROVE_RELEASE_ORG,
      signingKeyFile: values.GROVE_RELEASE_SIGNING_KEY_FILE,
      signingKeyPassword: env.GROVE_RELEASE_SIGNING_KEY_PASSWORD,
      maxBytes: positive("GROVE_RELEASE_MAX_BYTES", DEFAULT_RELEASE_MAX_BYTES)
    },
    sitesDomain: values.GROVE_SITES_DOMAIN?.toLowerCase().replace(/^\.+|\.+$/g, "") || undefined,
    otlpTracesUrl: otlpTracesUrl(values.GROVE_OTLP_ENDPOINT, env),
    // From the environment only: a switch for benchmarks and tests comparing both paths.
    fastReads: !["0", "false", "off"].includes((env.GROVE_FAST_READS ?? "").toLowerCase()),
    otlpHeaders: otlpHeaders(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? env.OTEL_EXPORTER_OTLP_HEADERS)
  }
}
