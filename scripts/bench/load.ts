/** One autocannon run and its one-line report, shared by the HTTP benchmarks. */
import autocannon from "autocannon"

export interface Result {
  readonly rps: number
  /** Requests answered in the run. */
  readonly total: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly errors: number
}

/**
 * A run of `duration` seconds, or of exactly `amount` requests when given; in `workers` worker
 * threads when given (a load generator on one thread tops out near 10k req/s).
 */
export const load = (
  url: string,
  headers: Record<string, string>,
  options: { readonly connections: number; readonly duration: number; readonly amount?: number; readonly workers?: number }
): Promise<Result> =>
  new Promise((resolve, reject) => {
    const size = options.amount === undefined ? { duration: options.duration } : { amount: options.amount }
    const threads = options.workers === undefined ? {} : { workers: options.workers }
    autocannon({ url, connections: options.connections, ...size, ...threads, headers, pipelining: 1 }, (error, result) => {
      if (error) return reject(error)
      resolve({
        rps: result.requests.average,
        total: result.requests.total,
        p50: result.latency.p50,
        p99: result.latency.p99,
        non2xx: result.non2xx,
        errors: result.errors
      })
    })
  })

export const line = (name: string, r: Result) =>
  `${name.padEnd(28)} ${r.rps.toFixed(0).padStart(8)} req/s   p50 ${String(r.p50).padStart(4)} ms   p99 ${String(r.p99).padStart(4)} ms   non-2xx ${r.non2xx}  errors ${r.errors}`

/** `--name value` from the command line, as a number. */
export const numberArg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
