/**
 * The settings of the features that have a section of their own in the server configuration
 * (releases, CI runners, gc and retention), and their defaults. `Config.ts` parses them and
 * re-exports this module.
 */

export interface ReleaseConfig {
  /** The organization whose service accounts' `release` keys publish; unset: publishing is off (403). */
  readonly org: string | undefined
  /** A minisign secret key file (`minisign -G`); unset: publishing answers 503 `signing_key_missing`. */
  readonly signingKeyFile: string | undefined
  /** From `GROVE_RELEASE_SIGNING_KEY_PASSWORD` only (never a flag: it would show in the process list). */
  readonly signingKeyPassword: string | undefined
  readonly maxBytes: number
}

/** A single-file client is about 120 MB; room for larger platforms' builds. */
export const DEFAULT_RELEASE_MAX_BYTES = 512 * 1024 * 1024

export interface CiConfig {
  /** Runs this node executes at once. */
  readonly concurrency: number
  /** Runs that may wait for a runner before manual starts and triggers answer 503. */
  readonly queueLimit: number
  /** Output kept per step; the rest is cut with a marker. */
  readonly stepOutputLimitBytes: number
  /** A job without `timeout-minutes` is stopped after this long. */
  readonly defaultJobTimeoutMinutes: number
  /** Where runs get their working directories. */
  readonly workDir: string
  /** Who steps are inside their sandbox (default `nobody`); with the shared runner, the host user steps run as when the server is root. */
  readonly runAsUser: string
  /** When the server runs as root, each running job gets its own host uid/gid in [uidBase, uidBase + 65536). */
  readonly uidBase: number
  /** Run steps on the host, unsandboxed, when bubblewrap cannot isolate them (otherwise no runner starts). */
  readonly unsafeSharedRunner: boolean
}

export const DEFAULT_CI: Omit<CiConfig, "workDir"> = {
  concurrency: 2,
  queueLimit: 100,
  stepOutputLimitBytes: 1024 * 1024,
  defaultJobTimeoutMinutes: 60,
  runAsUser: "nobody",
  uidBase: 200_000,
  unsafeSharedRunner: false
}

export interface GcConfig {
  /** How long an unreferenced object stays before it is marked, and a mark before it is swept. */
  readonly graceMs: number
  /** The server's periodic run; 0: off. */
  readonly intervalMs: number
  /** Each unset: kept forever. */
  readonly retention: {
    readonly ciLogsMs?: number | undefined
    readonly ciCachesMs?: number | undefined
    readonly webhookDeliveriesMs?: number | undefined
  }
}

/** Grace 1 h, a run every 6 h, everything kept (as before gc existed). */
export const DEFAULT_GC: GcConfig = { graceMs: 3_600_000, intervalMs: 6 * 3_600_000, retention: {} }
