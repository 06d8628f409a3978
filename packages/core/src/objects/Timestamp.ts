/**
 * Commit timestamps, kept as epoch nanoseconds so no precision is lost (Date has milliseconds,
 * Postgres timestamptz microseconds), and printed exactly as Rust chrono's `to_rfc3339()` does,
 * since that string is part of the commit hash.
 */

const NS_PER_SECOND = 1_000_000_000n

// Date, time, optional 1-9 digit fraction, `Z` or a ±hh:mm offset (RFC 3339 allows lowercase t/z).
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/

const isLeapYear = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0
const daysInMonth = (y: number, m: number): number =>
  m === 2 ? (isLeapYear(y) ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31

/**
 * Epoch nanoseconds of an RFC 3339 timestamp, or undefined when it is not one. Years are limited
 * to 0000-9999 (what the four-digit form can print) and leap seconds (`:60`) are refused.
 */
export const parseTimestamp = (value: string): bigint | undefined => {
  const m = RFC3339.exec(value)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  let offsetMinutes = 0
  if (m[9] !== undefined) {
    const oh = Number(m[10])
    const om = Number(m[11])
    if (oh > 23 || om > 59) return undefined
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (oh * 60 + om)
  }
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day) // not Date.UTC: it maps years 0-99 to 1900-1999
  date.setUTCHours(hour, minute, second, 0)
  const seconds = BigInt(date.getTime() / 1000 - offsetMinutes * 60)
  const fraction = BigInt((m[7] ?? "").padEnd(9, "0"))
  const ns = seconds * NS_PER_SECOND + fraction
  return inPrintableRange(ns) ? ns : undefined
}

const startOfYear = (year: number): bigint => {
  const date = new Date(0)
  date.setUTCFullYear(year, 0, 1)
  return BigInt(date.getTime()) * 1_000_000n
}
// Years 0000-9999: beyond them chrono and toISOString print signed, wider years.
const MIN_NS = startOfYear(0)
const MAX_NS = startOfYear(10000)
const inPrintableRange = (ns: bigint): boolean => ns >= MIN_NS && ns < MAX_NS

/**
 * chrono's `to_rfc3339()` for a UTC time: `YYYY-MM-DDTHH:MM:SS`, a fraction only when non-zero with
 * the fewest of 3, 6 or 9 digits that hold it, then `+00:00`. `offset: "Z"` gives the form chrono's
 * serde uses for `DateTime<Utc>` in JSON *(inferred)*; the hash always uses `+00:00`.
 */
export const formatTimestamp = (epochNanos: bigint, offset: "+00:00" | "Z" = "+00:00"): string => {
  let seconds = epochNanos / NS_PER_SECOND
  let nanos = epochNanos % NS_PER_SECOND
  if (nanos < 0n) {
    nanos += NS_PER_SECOND
    seconds -= 1n
  }
  const whole = new Date(Number(seconds) * 1000).toISOString().slice(0, 19)
  const n = Number(nanos)
  const fraction = n === 0
    ? ""
    : n % 1_000_000 === 0
    ? `.${String(n / 1_000_000).padStart(3, "0")}`
    : n % 1_000 === 0
    ? `.${String(n / 1_000).padStart(6, "0")}`
    : `.${String(n).padStart(9, "0")}`
  return `${whole}${fraction}${offset}`
}

/** The same instant in the form the commit hash uses, or undefined for an invalid timestamp. */
export const canonicalTimestamp = (value: string): string | undefined => {
  const ns = parseTimestamp(value)
  return ns === undefined ? undefined : formatTimestamp(ns)
}

export const fromDate = (date: Date): bigint => BigInt(date.getTime()) * 1_000_000n
