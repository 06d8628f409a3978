import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { execFile } from "node:child_process"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { promisify } from "node:util"
import { collectFlavor, GROWTH_BYTES, IDLE_UTILIZATION, isTransfer, loadTrim, type Look, MIN_INTERVAL, openTransfers, processLooks, shouldCollect, TRIM_FREED_BYTES, watch } from "./IdleGc.ts"

const MiB = 1024 * 1024
/** No collection by this watch yet. */
const never = Infinity

describe("IdleGc.shouldCollect", () => {
  it("collects what V8 holds past the live bytes, whatever the RSS (a collection during a push left it high)", () => {
    // V8's used heap and buffers after the last collection: 60 MiB; now 60 + 40 MiB of a clone's garbage.
    expect(shouldCollect({ utilization: 0.02, held: 100 * MiB, floor: 60 * MiB, sinceLast: never, busySinceLast: false })).toBe(true)
  })

  it("collects once idle and grown past the floor by more than the allowance", () => {
    expect(shouldCollect({ utilization: 0.01, held: 200 * MiB + GROWTH_BYTES + 1, floor: 200 * MiB, sinceLast: never, busySinceLast: false })).toBe(true)
  })

  it("leaves a busy process alone, however much it grew (a transfer still running)", () => {
    expect(shouldCollect({ utilization: IDLE_UTILIZATION, held: 900 * MiB, floor: 200 * MiB, sinceLast: never, busySinceLast: false })).toBe(false)
    expect(shouldCollect({ utilization: 0.6, held: 900 * MiB, floor: 200 * MiB, sinceLast: never, busySinceLast: false })).toBe(false)
  })

  it("leaves an idle process alone that grew within the allowance (no collection every period)", () => {
    expect(shouldCollect({ utilization: 0, held: 200 * MiB + GROWTH_BYTES, floor: 200 * MiB, sinceLast: never, busySinceLast: false })).toBe(false)
    expect(shouldCollect({ utilization: 0, held: 150 * MiB, floor: 200 * MiB, sinceLast: never, busySinceLast: false })).toBe(false)
  })

  it("collects at most once per MIN_INTERVAL under steady moderate load (16 MiB of garbage every period)", () => {
    const min = Duration.toMillis(MIN_INTERVAL)
    const grown = { utilization: 0.3, held: 200 * MiB + 2 * GROWTH_BYTES, floor: 200 * MiB, busySinceLast: false }
    expect(shouldCollect({ ...grown, sinceLast: 10_000 })).toBe(false)
    expect(shouldCollect({ ...grown, sinceLast: min - 1 })).toBe(false)
    expect(shouldCollect({ ...grown, sinceLast: min })).toBe(true)
  })

  it("collects within MIN_INTERVAL when the process was busy since (a transfer after a collection in its pause)", () => {
    const grown = { utilization: 0.05, held: 200 * MiB + 2 * GROWTH_BYTES, floor: 200 * MiB, sinceLast: 10_000 }
    expect(shouldCollect({ ...grown, busySinceLast: true })).toBe(true)
    expect(shouldCollect({ ...grown, busySinceLast: false })).toBe(false)
  })
})

describe("IdleGc.collectFlavor", () => {
  it("the last-resort collection only after a busy period (a transfer's end), a plain one under steady load", () => {
    expect(collectFlavor({ busySinceLast: true })).toBe("last-resort")
    expect(collectFlavor({ busySinceLast: false })).toBe("regular")
  })
})

/**
 * Runs `watch` on the test clock to `until` ms with looks scripted by `busyAt` (whether the event loop is busy at t),
 * `heldAt` (V8's held MiB at t, given the collections so far) and `freeAt` (malloc's free MiB at t), and answers
 * the gc and trim calls in order.
 */
const scripted = (
  until: number,
  busyAt: (t: number) => boolean,
  heldAt: (t: number, gcs: number) => number,
  freeAt: (t: number) => number = () => 20
) =>
  Effect.gen(function*() {
    let now = 0
    let lastLook = 0
    const calls: Array<string> = []
    const look = (): Look => {
      let busy = 0
      for (let t = lastLook; t < now; t += 100) busy += busyAt(t) ? 100 : 0
      const utilization = busy / Math.max(1, now - lastLook)
      lastLook = now
      return { utilization, held: heldAt(now, calls.filter((call) => call.startsWith("gc")).length) * MiB }
    }
    const watching = yield* Effect.forkChild(watch((flavor) => void calls.push(`gc ${now} ${flavor}`), look, () => {
      calls.push(`trim ${now}`)
      return true
    }, () => freeAt(now) * MiB))
    while (now < until) {
      now += 500
      yield* TestClock.adjust("500 millis")
    }
    yield* Fiber.interrupt(watching)
    return calls
  })

/** When `scripted`'s watch collected (ms). */
const collections = (calls: ReadonlyArray<string>) => calls.filter((call) => call.startsWith("gc")).map((call) => Number(call.split(" ")[1]))

/** A push (busy to 6 s), idle 6-12 s, a clone (busy 12-18 s), then idle. */
const pushThenClone = (t: number) => t < 6_000 || (t >= 12_000 && t < 18_000)
/** V8 grows 80 MiB over each of pushThenClone's transfers. */
const pushThenCloneHeld = (t: number, gcs: number) =>
  60 + 80 * (gcs === 0 ? Math.min(t, 6_000) / 6_000 : Math.max(0, Math.min(t, 18_000) - 12_000) / 6_000)

/** `scripted`'s collections' flavors, in order. */
const flavors = (calls: ReadonlyArray<string>) => calls.filter((call) => call.startsWith("gc")).map((call) => call.split(" ")[2])

describe("IdleGc.watch", () => {
  it.effect("a steadily loaded server's collections are plain ones (a last-resort pause ~2.5x longer every 30 s)", () =>
    Effect.gen(function*() {
      // 30% busy throughout (idle by IDLE_UTILIZATION, never a busy look); V8 grows 2 MiB/s over its live 60 MiB.
      const busyAt = (t: number) => t % 1_000 < 300
      let base = 0
      const calls = yield* scripted(95_000, busyAt, (t, gcs) => {
        if (gcs > 0 && base === 0) base = t
        return 60 + 2 * (t - (gcs > 0 ? base : 0)) / 1_000
      })
      expect(collections(calls).length, calls.join(", ")).toBeGreaterThanOrEqual(2)
      expect(new Set(flavors(calls)), calls.join(", ")).toEqual(new Set(["regular"]))
    }))

  it.effect("a transfer's garbage goes with a last-resort collection (its young generation and emptied pages too)", () =>
    Effect.gen(function*() {
      expect(flavors(yield* scripted(40_000, pushThenClone, pushThenCloneHeld))).toEqual(["last-resort", "last-resort"])
    }))

  it.effect("not during a transfer's pause of one period (the client busy, a loaded machine)", () =>
    Effect.gen(function*() {
      // Busy until 20 s, except an idle 2 s at 4-6 s; V8 grows from its live 60 MiB to 140 by 4 s.
      const busyAt = (t: number) => t < 4_000 || (t >= 6_000 && t < 20_000)
      const collected = collections(yield* scripted(30_000, busyAt, (t, gcs) => gcs === 0 ? 60 + 80 * Math.min(t, 4_000) / 4_000 : 60))
      expect(collected.length, `collections at ${collected.join(", ")} ms`).toBe(1)
      expect(collected[0]!).toBeGreaterThan(20_000)
    }))

  it.effect("collects again after a transfer that followed a collection, within 6 s, not MIN_INTERVAL after the first", () =>
    Effect.gen(function*() {
      // A push (busy to 6 s), idle 6-12 s (collected), a clone (busy 12-18 s), then idle; V8 grows 80 MiB in each.
      const collected = collections(yield* scripted(40_000, pushThenClone, pushThenCloneHeld))
      expect(collected.length, `collections at ${collected.join(", ")} ms`).toBe(2)
      expect(collected[1]! - 18_000).toBeLessThanOrEqual(6_000)
    }))

  it.effect("collects a transfer's garbage within 6 s of its end (looking every 10 s: 13 s after it)", () =>
    Effect.gen(function*() {
      // 60 MiB live; a transfer keeps the event loop busy for 7 s and V8 grows to 140 MiB, then the process idles.
      const END = 7_000
      const collected = collections(yield* scripted(30_000, (t) => t < END, (t, gcs) => gcs === 0 ? 60 + 80 * Math.min(t, END) / END : 60))
      expect(collected[0], "when it collected (ms)").toBeDefined()
      expect(collected[0]!).toBeGreaterThan(END)
      expect(collected[0]! - END).toBeLessThanOrEqual(6_000)
    }))

  it.effect("gives malloc's free pages back right after each collection, and not again in the idle after it", () =>
    Effect.gen(function*() {
      // Busy to 6 s, idle to 12 s, busy to 18 s, then idle (as the test above): two collections.
      const calls = yield* scripted(40_000, pushThenClone, pushThenCloneHeld)
      expect(calls.length, calls.join(", ")).toBe(4)
      expect(calls[1]).toBe(`trim ${collections(calls)[0]}`)
      expect(calls[3]).toBe(`trim ${collections(calls)[1]}`)
    }))
})

describe("IdleGc.watch's trim without a collection", () => {
  it.effect("trims once when idle after a transfer that left V8 under GROWTH_BYTES (malloc's free pages)", () =>
    Effect.gen(function*() {
      // A clone keeps the process busy to 7 s; V8 grows by 8 MiB only, so no collection is due.
      const calls = yield* scripted(40_000, (t) => t < 7_000, (t) => 60 + 8 * Math.min(t, 7_000) / 7_000)
      expect(calls.length, calls.join(", ")).toBe(1)
      const [what, at] = calls[0]!.split(" ")
      expect(what).toBe("trim")
      expect(Number(at)).toBeGreaterThan(7_000)
      expect(Number(at) - 7_000).toBeLessThanOrEqual(6_000)
    }))

  it.effect("trims again after the rest of a clone whose garbage was collected in its pause, once per idle period", () =>
    Effect.gen(function*() {
      // Busy to 6 s (V8 +80 MiB), idle 6-12 s (collected and trimmed), busy 12-18 s again with V8 +8 MiB, then idle
      // to 40 s; then busy for one look at 40-41 s (a swing, not a busy period: BUSY_LOOKS) and idle to 60 s.
      const busyAt = (t: number) => t < 6_000 || (t >= 12_000 && t < 18_000) || (t >= 40_000 && t < 41_000)
      const calls = yield* scripted(
        60_000,
        busyAt,
        (t, gcs) => gcs === 0 ? 60 + 80 * Math.min(t, 6_000) / 6_000 : 60 + 8 * Math.max(0, Math.min(t, 18_000) - 12_000) / 6_000
      )
      const at = (call: string) => Number(call.split(" ")[1])
      expect(calls.map((call) => call.split(" ")[0]), calls.join(", ")).toEqual(["gc", "trim", "trim"])
      expect(at(calls[1]!)).toBe(at(calls[0]!))
      expect(at(calls[0]!)).toBeLessThan(12_000)
      // The rest of the clone: trimmed within 6 s of its end, with no collection.
      expect(at(calls[2]!)).toBeGreaterThan(18_000)
      expect(at(calls[2]!) - 18_000).toBeLessThanOrEqual(6_000)
      // Not again in that idle period (18-40 s), nor after the one busy look at 40 s.
      for (const call of calls) expect(busyAt(at(call) - 1), call).toBe(false)
    }))

  it.effect("trims once idle after malloc's free bytes grew by TRIM_FREED_BYTES with no busy look (a clone on a quiet machine)", () =>
    Effect.gen(function*() {
      // Never busy. A clone takes 10 MiB of malloc's free chunks at 4-6 s and frees 30 MiB at 10 s; trimmed chunks stay
      // free (the level does not fall); the free bytes drift by 4 MiB at 30 s.
      const freeAt = (t: number) => t < 4_000 ? 20 : t < 10_000 ? 10 : t < 30_000 ? 40 : 44
      const calls = yield* scripted(60_000, () => false, () => 60, freeAt)
      expect(calls.length, calls.join(", ")).toBe(1)
      const [what, at] = calls[0]!.split(" ")
      expect(what).toBe("trim")
      expect(Number(at)).toBeGreaterThanOrEqual(10_000)
      expect(Number(at) - 10_000).toBeLessThanOrEqual(4_000)
      expect(TRIM_FREED_BYTES).toBeGreaterThan(4 * MiB)
    }))

  it.effect("a load swinging about the busy share (one look in three) neither lifts MIN_INTERVAL nor trims at each swing", () =>
    Effect.gen(function*() {
      // Busy one 2 s look in three, 5 MiB of garbage a second: collected at most once per MIN_INTERVAL (the review's
      // 55/35/35 case collected every 10 s), and no trim but the one after each collection.
      const calls = yield* scripted(60_000, (t) => Math.floor(t / 2_000) % 3 === 0, (t) => 60 + 5 * t / 1_000)
      const gcs = calls.filter((call) => call.startsWith("gc")).length
      expect(gcs, calls.join(", ")).toBeLessThanOrEqual(2)
      expect(calls.filter((call) => call.startsWith("trim")).length, calls.join(", ")).toBe(gcs)
    }))

  it.effect("does not trim while the process stays idle (no busy look since the start, the RSS steady)", () =>
    Effect.gen(function*() {
      const calls = yield* scripted(60_000, () => false, () => 60)
      expect(calls).toEqual([])
    }))
})

describe("IdleGc.collectAll", () => {
  // A process started as grove-server starts (--expose-gc, 8 MiB semi-spaces) that made garbage in both generations.
  const child = `
    const { collectAll } = await import(${JSON.stringify(pathToFileURL(path.join(import.meta.dirname, "IdleGc.ts")).href)})
    let garbage = []
    for (let round = 0; round < 40; round++) {
      const objects = []
      for (let i = 0; i < 20_000; i++) objects.push({ i, text: "x" + i, list: [i, i + 1, i + 2] })
      if (round % 4 === 0) garbage.push(objects)
    }
    garbage = []
    collectAll(globalThis.gc)
    const { heapTotal, heapUsed } = process.memoryUsage()
    console.log(JSON.stringify({ heapTotal, heapUsed }))
  `

  it("gives back the heap pages the collection emptied (a plain full collection left ~22 of 46 MiB committed unused)", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--expose-gc", "--max-semi-space-size=8", "--input-type=module", "-e", child],
      { timeout: 120_000 }
    )
    const { heapTotal, heapUsed } = JSON.parse(stdout) as { heapTotal: number; heapUsed: number }
    expect((heapTotal - heapUsed) / MiB).toBeLessThan(8)
  }, 150_000)
})

describe("IdleGc.loadTrim", () => {
  it("loads the addon npm install built (packages/server/native: glibc's malloc_trim), which trims and answers", () => {
    const malloc = loadTrim()
    if (typeof malloc === "string") expect.fail(`the addon did not load: ${malloc}`)
    expect(typeof malloc.trim()).toBe("boolean")
    // glibc 2.33+ (this project's images: 2.36): malloc's free bytes.
    expect(malloc.freeBytes?.()).toBeGreaterThanOrEqual(0)
  })
})

describe("IdleGc.processLooks", () => {
  it("a look while a transfer is open counts as busy, whatever the event loop did", async () => {
    let open = 1
    const look = processLooks(() => open)
    const idleFor = (ms: number) => new Promise((r) => setTimeout(r, ms))
    await idleFor(100)
    expect(look().utilization).toBe(1)
    open = 0
    await idleFor(100)
    expect(look().utilization).toBeLessThan(IDLE_UTILIZATION)
  })

  it("isTransfer: the sync routes that move content, not GETs nor other writes (V3: short POSTs made busy periods)", () => {
    for (const [method, url] of [["POST", "/api/o/n/chunks/batch"], ["POST", "/api/o/n/chunks/fetch"], ["PUT", "/api/o/n/chunks/ab12"],
      ["POST", "/api/o/n/chunks/download"], ["POST", "/api/o/n/blobs/check"], ["POST", "/api/o/n/push"], ["POST", "/api/o/n/push?x=1"],
      ["POST", "/o/n.git/git-upload-pack"]] as const) expect(isTransfer(method, url), `${method} ${url}`).toBe(true)
    for (const [method, url] of [["GET", "/api/o/n/chunks/fetch/ab12"], ["HEAD", "/api/o/n/push"], ["POST", "/api/o/n/merges"],
      ["PATCH", "/api/o/n"], ["POST", "/api/o/n/branches"], ["DELETE", "/api/o/n/branches/pushed"], ["POST", "/api/o/n/pushes"], ["POST", "/api/chunks/blobs/merges"], ["POST", "/api/o/chunks/merges"],
      [undefined, undefined]] as const) expect(isTransfer(method, url), `${method} ${url}`).toBe(false)
  })

  it("openTransfers counts the transfers being answered, each until its response closes", async () => {
    const http = await import("node:http")
    const held: Array<import("node:http").ServerResponse> = []
    const server = http.createServer((_request, response) => void held.push(response))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as import("node:net").AddressInfo
    const transfers = openTransfers()
    const send = (method: string, path = "/api/o/n/chunks/batch") => {
      const request = http.request({ host: "127.0.0.1", port, method, path, agent: false })
      request.on("error", () => {})
      request.end(method === "GET" ? undefined : "chunk bytes")
      return request
    }
    const until = async (check: () => boolean) => {
      for (let i = 0; i < 300 && !check(); i++) await new Promise((r) => setTimeout(r, 10))
    }
    try {
      // A GET (an event stream, a followed log) may stay open for minutes: never a transfer.
      send("GET")
      send("POST", "/api/o/n/merges") // a write, not a transfer
      await until(() => held.length === 2)
      expect(transfers()).toBe(0)
      send("POST")
      await until(() => held.length === 3)
      const put = send("PUT", "/api/o/n/chunks/ab12")
      await until(() => held.length === 4)
      expect(transfers()).toBe(2)
      held[2]!.end()
      await until(() => transfers() === 1)
      expect(transfers()).toBe(1)
      // A client that goes away: its response closes unanswered.
      put.destroy()
      await until(() => transfers() === 0)
      expect(transfers()).toBe(0)
    } finally {
      for (const response of held) response.destroy()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
