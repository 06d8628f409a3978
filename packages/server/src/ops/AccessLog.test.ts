import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { type AccessEntry, formatEntry, writer } from "./AccessLog.ts"

const base: AccessEntry = {
  requestId: "ab12cd34-1z",
  method: "GET",
  route: "/api/:owner/:name",
  status: 200,
  seconds: 0.000123456,
  bytes: 512,
  caller: "user:alice"
}

/** Waits (spinning: a timer may take far longer on a loaded machine) until the clock has passed `ms`. */
const after = (ms: number) => {
  while (Date.now() <= ms) {
    // spin
  }
}

describe("access log writer", () => {
  it("stamps each line with the millisecond it was written (the shared stamp never goes stale), in one write per turn", async () => {
    const written: Array<string> = []
    const log = writer("json", (text) => written.push(text))
    const bounds: Array<[number, number]> = []
    for (const status of [200, 304, 404]) {
      const before = Date.now()
      log.write({ ...base, status })
      bounds.push([before, Date.now()])
      after(Date.now() + 1)
    }
    expect(written).toEqual([])
    await new Promise((resolve) => setImmediate(resolve))
    expect(written).toHaveLength(1)
    const lines = written[0]!.trimEnd().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines.map((line) => line.status)).toEqual([200, 304, 404])
    lines.forEach((line, i) => {
      const at = Date.parse(line.timestamp as string)
      expect(at).toBeGreaterThanOrEqual(bounds[i]![0])
      expect(at).toBeLessThanOrEqual(bounds[i]![1])
    })
    expect(Object.keys(lines[0]!)).toEqual(["timestamp", "level", "message", "request_id", "method", "route", "status", "duration_ms", "bytes", "caller"])
    expect(lines[0]).toMatchObject({ level: "INFO", message: "request", request_id: base.requestId, duration_ms: 0.123, bytes: 512, caller: "user:alice" })
  })

  it("lines of the turn the process exits in are written before it exits", () => {
    // The server stops with process.exit once drained; a line written in that turn has no later turn to go out in.
    const script = `const { writer } = await import(${JSON.stringify(new URL("./AccessLog.ts", import.meta.url).href)})
      const log = writer("json")
      log.write(${JSON.stringify(base)})
      log.write(${JSON.stringify({ ...base, requestId: "last-one", status: 503 })})
      process.exit(0)`
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" })
    expect(child.status, child.stderr).toBe(0)
    const lines = child.stdout.trimEnd().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines.map((line) => [line.request_id, line.status])).toEqual([[base.requestId, 200], ["last-one", 503]])
  })

  it("all of a large exit flush goes through a pipe or socket, after output Node still held, without gluing to a cut line", () => {
    // stdout on a pipe or socket is non-blocking: a plain write on the way out went only as far as the
    // reader's free buffer (a socket pair's here; ~1 MB of lines is many times that, whatever the reader's pace).
    const script = (before: string) => `const { writer } = await import(${JSON.stringify(new URL("./AccessLog.ts", import.meta.url).href)})
      const log = writer("json")
      ${before}
      for (let i = 0; i < 5000; i++) log.write({ ...${JSON.stringify(base)}, requestId: "r" + i })
      process.exit(0)`
    for (const before of ["", `process.stdout.write("z".repeat(4e6) + "\\n")`]) {
      const child = spawnSync(process.execPath, ["--input-type=module", "-e", script(before)], {
        encoding: "utf8",
        maxBuffer: 64 << 20,
        timeout: 120_000
      })
      expect(child.status, child.stderr).toBe(0)
      const lines = child.stdout.trimEnd().split("\n").filter((line) => !/^z*$/.test(line))
      expect(lines).toHaveLength(5000)
      expect(lines.map((line) => (JSON.parse(line) as Record<string, unknown>).request_id)).toEqual(
        Array.from({ length: 5000 }, (_, i) => `r${i}`)
      )
    }
  })

  it("text lines carry the same stamp", async () => {
    const written: Array<string> = []
    const log = writer("text", (text) => written.push(text))
    const before = Date.now()
    log.write({ ...base, bytes: undefined, caller: undefined })
    const end = Date.now()
    await new Promise((resolve) => setImmediate(resolve))
    const match = /^\[(\S+)\] GET \/api\/:owner\/:name 200 0\.123ms - - request_id=ab12cd34-1z\n$/.exec(written[0]!)
    expect(match).not.toBeNull()
    const at = Date.parse(match![1]!)
    expect(at).toBeGreaterThanOrEqual(before)
    expect(at).toBeLessThanOrEqual(end)
  })

  it("a JSON line is the JSON of the entry's fields, whatever characters they hold", () => {
    const texts = ["", "plain", "quote\"d", "back\\slash", "tab\tand\nnewline", "ctl\u0001", "del\u007f", "ünïcødé", "\u2028", "😀", "\ud800"]
    for (const text of texts) {
      for (const extra of [{}, { traceId: text, bytes: undefined, caller: undefined }, { seconds: Number.NaN, bytes: 1.5 }]) {
        const entry: AccessEntry = { ...base, requestId: text, route: text, caller: text, ...extra }
        const line = formatEntry("json", entry, text)
        expect(line).toBe(JSON.stringify({
          timestamp: text,
          level: "INFO",
          message: "request",
          request_id: entry.requestId,
          method: entry.method,
          route: entry.route,
          status: entry.status,
          duration_ms: Math.round(entry.seconds * 1e6) / 1e3,
          bytes: entry.bytes ?? null,
          caller: entry.caller ?? null,
          ...(entry.traceId === undefined ? {} : { trace_id: entry.traceId })
        }))
      }
    }
  })
})
