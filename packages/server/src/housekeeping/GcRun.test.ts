/**
 * The text `grove-server gc` prints (formatReport): what an operator reads after a run. test/ops/gc checks the JSON.
 */
import { describe, expect, it } from "@effect/vitest"
import { formatReport, type GcReport } from "./GcRun.ts"

const report = (namespaces: number, dryRun = false): GcReport => ({
  dry_run: dryRun,
  grace_seconds: 3600,
  duration_ms: 12,
  content: {
    stagedPushes: 1,
    marked: { blobs: 4, chunks: 5 },
    unmarked: 2,
    freed: { blobs: 3, chunks: 7, objects: 9, bytes: 7000, usedBytes: 6000, namespaces }
  },
  retention: { ciLogPieces: 0, ciCaches: 0, ciObjects: 0, ciBytes: 0, webhookDeliveries: 0, webhookAttempts: 0 }
})

describe("formatReport", () => {
  it("names the namespaces of deleted organizations it emptied, and says nothing of them when there were none", () => {
    const [, content] = formatReport(report(2)).split("\n")
    expect(content).toBe(
      "content: freed 7 chunks (7000 bytes, 6000 of them counted in quotas), 3 blobs, 9 objects " +
        "(with 2 namespaces of deleted organizations); 1 abandoned staged pushes"
    )
    expect(formatReport(report(0)).split("\n")[1]).toBe(
      "content: freed 7 chunks (7000 bytes, 6000 of them counted in quotas), 3 blobs, 9 objects; 1 abandoned staged pushes"
    )
  })

  it("says a dry run deleted nothing and what it would free", () => {
    const text = formatReport(report(1, true))
    expect(text.split("\n")[0]).toBe("gc (dry run: nothing deleted), grace 3600 s, 12 ms")
    expect(text).toContain("content: would free 7 chunks")
    expect(text).toContain("(with 1 namespace of deleted organizations)")
  })
})
