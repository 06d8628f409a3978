import { ApiSync } from "@grove/api"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import * as fs from "node:fs/promises"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { vi } from "vitest"
import { envLayer, repository, tempDir } from "../../test/support.ts"
import { CliFailure } from "../Failures.ts"
import { commitWorkingTree } from "../local/Commit.ts"
import { currentBranch, initialState, newBranch } from "../local/State.ts"
import { saveState, writeConfig } from "../local/Workspace.ts"
import { outgoing, pushRequest } from "../sync/Outgoing.ts"
import { publish } from "./Push.ts"

/** What the stand-in server and the client did, in order: `batch N answered`, `push encoded`, `push received`. */
type Events = Array<string>

/**
 * A stand-in server for a push of small files: the repository exists, no capabilities, chunks/batch and push. The
 * first batch is answered at once; later ones are held until `release()` (or 20 s, so a client that waits for them
 * before building its push still ends). `failBatch` answers that batch (1-based) 400 instead.
 */
const pushServer = (events: Events, options: { readonly failBatch?: number } = {}) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; pushBodies: Array<Buffer>; release: () => void; server: http.Server }>((resolve) => {
        const pushBodies: Array<Buffer> = []
        const held: Array<() => void> = []
        let released = false
        const release = () => {
          released = true
          for (const answer of held.splice(0)) answer()
        }
        const fallback = setTimeout(release, 20_000)
        let batches = 0
        const json = (response: http.ServerResponse, status: number, body: unknown) => {
          response.writeHead(status, { "content-type": "application/json" })
          response.end(JSON.stringify(body))
        }
        const server = http.createServer((request, response) => {
          const parts: Array<Buffer> = []
          request.on("data", (part: Buffer) => parts.push(part))
          request.on("end", () => {
            const url = request.url ?? ""
            if (url === "/api/alice/demo") return json(response, 200, repository)
            if (url === "/api/capabilities") return json(response, 200, {})
            if (url === "/api/alice/demo/chunks/batch") {
              const n = ++batches
              const answer = () => {
                events.push(`batch ${n} answered`)
                if (n === options.failBatch) json(response, 400, { error: "a frame is cut short", code: "invalid_batch" })
                else json(response, 200, {})
              }
              if (n === 1 || released) answer()
              else held.push(answer)
              return
            }
            if (url === "/api/alice/demo/push") {
              events.push("push received")
              pushBodies.push(Buffer.concat(parts))
              const sent = JSON.parse(Buffer.concat(parts).toString("utf8")) as ApiSync.PushRequest
              return json(response, 200, { success: true, new_head: sent.commits.at(-1)!.hash, message: "ok" })
            }
            json(response, 404, { error: `no route ${request.method} ${url}` })
          })
        })
        server.on("close", () => clearTimeout(fallback))
        server.listen(0, "127.0.0.1", () => {
          resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, pushBodies, release, server })
        })
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  )

/** A checkout of 600 small files (three chunk batches of <= 256) committed on a branch never pushed. */
const checkout = (url: string) =>
  Effect.gen(function*() {
    const root = yield* tempDir("push-ahead")
    const workspace = yield* writeConfig(root, { remote: url, owner: "alice", name: "demo" })
    yield* Effect.promise(async () => {
      for (let d = 0; d < 10; d++) {
        await fs.mkdir(path.join(root, `d${d}`))
        for (let i = 0; i < 60; i++) await fs.writeFile(path.join(root, `d${d}`, `f${i}.txt`), `file ${d}/${i}\n`)
      }
    })
    const start = initialState("alice", newBranch("alice-abcdef"))
    yield* saveState(workspace, start)
    const { state } = yield* commitWorkingTree(workspace, start)
    return { root, workspace, state }
  })

/** Runs `body` with JSON.stringify spied: a push body being encoded is recorded in `events` and calls `onPush`. */
const spyingEncodes = <A, E, R>(events: Events, onPush: () => void, body: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const original = JSON.stringify
      return vi.spyOn(JSON, "stringify").mockImplementation(function(this: unknown, ...args: Parameters<typeof JSON.stringify>) {
        const value = args[0] as Record<string, unknown> | null
        if (typeof value === "object" && value !== null && "expected_head" in value && "trees" in value) {
          events.push("push encoded")
          onPush()
        }
        return original.apply(JSON, args)
      })
    }),
    () => body,
    (spy) => Effect.sync(() => spy.mockRestore())
  )

const runIn = (root: string) => Effect.provide(envLayer({ home: root, cwd: root, env: { SERVICE_API_KEY: "grove_test" } }))

describe("Push.publish", () => {
  it.effect("builds the push body while the batches upload and sends it after the last: the same bytes as the plain encode", () =>
    Effect.gen(function*() {
      const events: Events = []
      const server = yield* pushServer(events)
      const { root, state, workspace } = yield* checkout(server.url)
      const branch = currentBranch(state)
      const sent = outgoing(workspace.objects.reader, branch)
      // What a push of these commits encodes to without any of this (the typed client's JSON body, uncompressed:
      // the server takes no zstd bodies).
      const expected = JSON.stringify(
        Schema.encodeSync(ApiSync.PushRequest)(pushRequest(null, branch, sent.commits, [], sent.trees))
      )
      const outcome = yield* spyingEncodes(events, server.release, publish(workspace, state)).pipe(runIn(root))
      expect(outcome.pushed).toBe(1)
      // The body was encoded while batches were still held: after the first batch's answer, before the others'.
      expect(events).toEqual(["batch 1 answered", "push encoded", "batch 2 answered", "batch 3 answered", "push received"])
      expect(server.pushBodies).toHaveLength(1)
      expect(server.pushBodies[0]!.toString("utf8")).toBe(expected)
    }).pipe(Effect.scoped), 60_000)

  it.effect("a failed batch fails the push with its error and the push request never goes", () =>
    Effect.gen(function*() {
      const events: Events = []
      const server = yield* pushServer(events, { failBatch: 2 })
      const { root, state, workspace } = yield* checkout(server.url)
      const exit = yield* Effect.exit(spyingEncodes(events, server.release, publish(workspace, state)).pipe(runIn(root)))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
      expect(error?._tag === "Fail" && error.error).toBeInstanceOf(CliFailure)
      expect(error?._tag === "Fail" && (error.error as CliFailure).message).toContain("a frame is cut short")
      expect(events).not.toContain("push received")
      expect(server.pushBodies).toHaveLength(0)
    }).pipe(Effect.scoped), 60_000)
})
