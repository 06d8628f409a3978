/**
 * Output of the content benchmark: the table (git vs grove, ratio, targets),
 * the pass/fail checks, and per-command phase breakdowns built from the
 * proxy's log (what the client did between and during its HTTP calls).
 */
import type { Ran } from "./procs.ts"
import type { Exchange } from "./proxy.ts"

export const median = (xs: ReadonlyArray<number>): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export const fmtMs = (ms: number) => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`)

export const fmtBytes = (n: number) =>
  n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`

export interface Row {
  readonly op: string
  readonly git: number
  readonly grove: number
  /** grove/git must be at most this. */
  readonly ratioTarget?: number
  /** grove's time must be under this. */
  readonly limitMs?: number
  readonly note: string
}

export interface Check {
  readonly what: string
  readonly value: string
  readonly target: string
  readonly pass: boolean
}

/** `/api/bench1/tree/chunks/batch?x=1` -> `chunks/batch`, other API paths without `/api/`. */
const route = (exchange: Exchange, repo: string) => {
  const bare = exchange.path.split("?")[0]!
  const prefix = `/api/${repo}/`
  const rest = bare.startsWith(prefix) ? bare.slice(prefix.length) : bare.replace(/^\/api\//, "")
  return `${exchange.method} ${rest.replace(/[0-9a-f]{40,}/g, "{hash}")}`
}

/**
 * Where one client command spent its time: start-up and local work before
 * the first request, each route (calls, time span, bytes) and local work
 * after the last answer.
 */
export const phases = (label: string, ran: Ran, exchanges: ReadonlyArray<Exchange>, repo: string): string => {
  const cpu = `client CPU ${fmtMs(ran.cpuMs)}${ran.serverCpuMs === undefined ? "" : `, server CPU ${fmtMs(ran.serverCpuMs)}`}`
  const lines = [`${label}: ${fmtMs(ran.ms)} total (${cpu}), ${exchanges.length} HTTP call(s)`]
  if (exchanges.length === 0) {
    lines.push("  no HTTP calls (all local)")
    return lines.join("\n")
  }
  const rel = (t: number) => t - ran.started
  const groups = new Map<string, Array<Exchange>>()
  for (const x of exchanges) {
    const key = route(x, repo)
    groups.set(key, [...(groups.get(key) ?? []), x])
  }
  const firstStart = Math.min(...exchanges.map((x) => x.start))
  const lastEnd = Math.max(...exchanges.map((x) => x.end))
  lines.push(`  ${"before the first request (start-up, local scan/hash)".padEnd(44)} ${fmtMs(rel(firstStart)).padStart(9)}`)
  for (const [key, xs] of [...groups.entries()].sort((a, b) => a[1][0]!.start - b[1][0]!.start)) {
    const from = Math.min(...xs.map((x) => x.start))
    const to = Math.max(...xs.map((x) => x.end))
    const busy = xs.reduce((s, x) => s + (x.end - x.start), 0)
    const up = xs.reduce((s, x) => s + x.requestBytes, 0)
    const down = xs.reduce((s, x) => s + x.responseBytes, 0)
    const chunks = xs.reduce((s, x) => s + x.chunks, 0)
    const statuses = [...new Set(xs.map((x) => x.status))].join("/")
    lines.push(
      `  ${`${key} x${xs.length} [${statuses}]`.padEnd(44)} ${fmtMs(to - from).padStart(9)} span (${fmtMs(rel(from))} -> ${fmtMs(rel(to))}, ` +
        `${fmtMs(busy)} in calls), up ${fmtBytes(up)}, down ${fmtBytes(down)}${chunks > 0 ? `, ${chunks} chunk(s)` : ""}`
    )
  }
  lines.push(`  ${"after the last answer (local writes, exit)".padEnd(44)} ${fmtMs(ran.ms - rel(lastEnd)).padStart(9)}`)
  return lines.join("\n")
}

export const printReport = (report: {
  readonly title: string
  readonly rows: ReadonlyArray<Row>
  readonly checks: ReadonlyArray<Check>
  readonly notes: ReadonlyArray<string>
  readonly details: ReadonlyArray<string>
}) => {
  const out: Array<string> = [report.title, ""]
  const header = `${"operation".padEnd(44)} ${"git".padStart(9)} ${"grove".padStart(9)} ${"ratio".padStart(7)}  ${"target".padEnd(16)} result`
  out.push(header, "-".repeat(header.length))
  for (const row of report.rows) {
    const ratio = row.grove / row.git
    let target = ""
    let result = ""
    if (row.ratioTarget !== undefined) {
      target = `ratio <= ${row.ratioTarget.toFixed(1)}x`
      result = ratio <= row.ratioTarget ? "PASS" : "FAIL"
    } else if (row.limitMs !== undefined) {
      target = `grove < ${row.limitMs} ms`
      result = row.grove < row.limitMs ? "PASS" : "FAIL"
    } else target = "(see checks)"
    out.push(`${row.op.padEnd(44)} ${fmtMs(row.git).padStart(9)} ${fmtMs(row.grove).padStart(9)} ${`${ratio.toFixed(2)}x`.padStart(7)}  ${target.padEnd(16)} ${result}`)
    if (row.note !== "") out.push(`${"".padEnd(4)}${row.note}`)
  }
  out.push("")
  for (const check of report.checks) {
    out.push(`${check.what}: ${check.value} (target ${check.target}) ${check.pass ? "PASS" : "FAIL"}`)
  }
  out.push("", ...report.notes.map((n) => `note: ${n}`), "", "Phase breakdown (grove, from the proxy log):", ...report.details)
  console.log(out.join("\n"))
}
