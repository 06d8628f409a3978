/**
 * Helpers for the CLI's unit tests: temporary directories, captured output, a port nobody listens on,
 * and a stand-in server with scripted answers.
 */
import { Effect, Layer, Option } from "effect"
import type { Console } from "effect"
import * as fs from "node:fs/promises"
import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { CliEnv } from "../src/CliEnv.ts"
import { CredentialStore } from "../src/Credentials.ts"
import { Interaction } from "../src/Interaction.ts"

/** A fresh directory, removed when the scope closes. */
/** A repository record as the server answers it (alice/demo, private, no head). */
export const repository = {
  id: "r1",
  owner: "alice",
  name: "demo",
  full_name: "alice/demo",
  is_public: false,
  visibility: "private",
  head: null,
  default_branch: "main",
  created_at: "2025-01-01T00:00:00.000Z",
  updated_at: "2025-01-01T00:00:00.000Z"
}

export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), `grove-cli-${prefix}-`))),
    (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
  )

export interface Captured {
  readonly console: Console.Console
  readonly stdout: Array<string>
  readonly stderr: Array<string>
}

/** A console that records what `Console.log` (stdout) and `Console.error` (stderr) print. */
export const captureConsole = (): Captured => {
  const stdout: Array<string> = []
  const stderr: Array<string> = []
  const format = (args: ReadonlyArray<unknown>) => args.map(String).join(" ")
  const console: Console.Console = Object.assign(Object.create(globalThis.console), {
    log: (...args: ReadonlyArray<unknown>) => void stdout.push(format(args)),
    error: (...args: ReadonlyArray<unknown>) => void stderr.push(format(args))
  })
  return { console, stdout, stderr }
}

/** A loopback port that was free a moment ago and has no listener: connecting is refused. */
export const closedPort = Effect.promise(() =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
)

/** Answers to prompts, in order; `isTerminal` says whether stdin looks like a terminal. */
export const scriptedInteraction = (isTerminal: boolean, answers: ReadonlyArray<string> = []) => {
  const queue = [...answers]
  const prompts: Array<string> = []
  const layer = Layer.succeed(Interaction, {
    isTerminal,
    readLine: (prompt: string) =>
      Effect.sync(() => {
        prompts.push(prompt)
        return Option.fromUndefinedOr(queue.shift())
      })
  })
  return { layer, prompts }
}

/** CliEnv + the real credential store under `home`. */
export const envLayer = (options: { readonly home: string; readonly cwd: string; readonly env?: Record<string, string> }) =>
  CredentialStore.layer.pipe(
    Layer.provideMerge(CliEnv.layerWith({ home: options.home, cwd: options.cwd, env: options.env ?? {} }))
  )

/** A canned answer of `scriptedServer`, or "drop": the connection is closed without one; "silent": never answered. */
export type ScriptedAnswer = { readonly status: number; readonly body: unknown } | "drop" | "silent"

/** Answers requests in order from `answers` (the last one repeats) and records each request's Idempotency-Key. */
export const scriptedServer = (answers: ReadonlyArray<ScriptedAnswer>) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; keys: Array<string | undefined>; server: http.Server }>((resolve) => {
        const keys: Array<string | undefined> = []
        const server = http.createServer((request, response) => {
          const answer = answers[Math.min(keys.length, answers.length - 1)]!
          keys.push(request.headers["idempotency-key"] as string | undefined)
          if (answer === "drop") return request.socket.destroy()
          if (answer === "silent") return request.resume()
          response.writeHead(answer.status, { "content-type": "application/json" })
          response.end(JSON.stringify(answer.body))
        })
        server.listen(0, "127.0.0.1", () => {
          resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, keys, server })
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

