import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Option } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { captureConsole, envLayer, tempDir } from "../test/support.ts"
import { CredentialStore } from "./Credentials.ts"
import { defaultRemote, resolveCredential } from "./CredentialResolver.ts"
import { DEFAULT_REMOTE } from "./Remote.ts"

const remote = "http://127.0.0.1:8080"

const writeCheckout = (root: string, config: Record<string, unknown>) =>
  Effect.promise(async () => {
    await fs.mkdir(path.join(root, ".grove"), { recursive: true })
    await fs.writeFile(path.join(root, ".grove", "config.json"), JSON.stringify(config))
  })

/** A home with a login session for `remote`, and a checkout `proj` (with a subdirectory) outside it. */
const setup = (options: { readonly checkoutRemote?: string; readonly sessionExpires?: string; readonly env?: Record<string, string> }) =>
  Effect.gen(function*() {
    const home = yield* tempDir("home")
    const work = yield* tempDir("work")
    const root = path.join(work, "proj")
    const cwd = path.join(root, "src", "deep")
    yield* Effect.promise(() => fs.mkdir(cwd, { recursive: true }))
    if (options.checkoutRemote !== undefined) yield* writeCheckout(root, { remote: options.checkoutRemote, key: "grove_checkout" })
    const layer = envLayer({ home, cwd, env: options.env ?? {} })
    yield* Effect.gen(function*() {
      const store = yield* CredentialStore
      yield* store.put(`${remote}`, {
        token: "grove_session",
        username: "alice",
        expires_at: options.sessionExpires ?? "2099-01-01T00:00:00.000Z",
        created_at: "2025-01-01T00:00:00.000Z"
      })
    }).pipe(Effect.provide(layer))
    return { home, root, cwd, layer }
  })

const resolve = (layer: ReturnType<typeof envLayer>, target = remote) => resolveCredential(target).pipe(Effect.provide(layer))

const winner = (resolution: Effect.Success<ReturnType<typeof resolveCredential>>) =>
  Option.getOrUndefined(Option.map(resolution.credential, (c) => [c.source, c.token]))

describe("resolveCredential", () => {
  it.live("SERVICE_API_KEY wins over the checkout's key and the login session", () =>
    Effect.gen(function*() {
      const { layer } = yield* setup({ checkoutRemote: `${remote}/`, env: { SERVICE_API_KEY: "grove_env" } })
      const resolution = yield* resolve(layer)
      expect(winner(resolution)).toEqual(["env", "grove_env"])
      expect(resolution.passed.map((p) => [p.source, p.reason])).toEqual([
        ["checkout", "overridden by the SERVICE_API_KEY environment variable"],
        ["session", "overridden by the SERVICE_API_KEY environment variable"]
      ])
    }))

  it.live("an empty SERVICE_API_KEY counts as unset", () =>
    Effect.gen(function*() {
      const { layer } = yield* setup({ env: { SERVICE_API_KEY: "" } })
      expect(winner(yield* resolve(layer))).toEqual(["session", "grove_session"])
    }))

  it.live("the key of the checkout above the working directory wins over the session when bound to the same server", () =>
    Effect.gen(function*() {
      const { layer, root } = yield* setup({ checkoutRemote: "HTTP://127.0.0.1:8080/" })
      const resolution = yield* resolve(layer)
      expect(winner(resolution)).toEqual(["checkout", "grove_checkout"])
      expect(Option.map(resolution.credential, (c) => c.location)).toEqual(Option.some(path.join(root, ".grove", "config.json")))
      expect(resolution.passed.map((p) => p.source)).toEqual(["session"])
    }))

  it.live("a checkout bound to another server is ignored: the session for the addressed server is used", () =>
    Effect.gen(function*() {
      const { layer } = yield* setup({ checkoutRemote: "http://127.0.0.1:9999" })
      const resolution = yield* resolve(layer)
      expect(winner(resolution)).toEqual(["session", "grove_session"])
      expect(resolution.passed.map((p) => [p.source, p.reason])).toEqual([
        ["checkout", "bound to http://127.0.0.1:9999, not this server"]
      ])
      // Addressed at the checkout's server, the checkout key wins and no session exists there.
      const other = yield* resolve(layer, "http://127.0.0.1:9999")
      expect(winner(other)).toEqual(["checkout", "grove_checkout"])
    }))

  it.live("sessions are per server; an expired session is passed over", () =>
    Effect.gen(function*() {
      const { layer } = yield* setup({ sessionExpires: "2001-01-01T00:00:00.000Z" })
      const expired = yield* resolve(layer)
      expect(Option.isNone(expired.credential)).toBe(true)
      expect(expired.passed[0]?.reason).toBe("login session of alice expired at 2001-01-01T00:00:00.000Z")
      const elsewhere = yield* resolve(layer, "http://127.0.0.1:8081")
      expect(elsewhere).toEqual({ remote: "http://127.0.0.1:8081", credential: Option.none(), passed: [] })
    }))

  it.live("~/.grove/config.json is not a checkout, and a broken checkout config is ignored", () =>
    Effect.gen(function*() {
      const home = yield* tempDir("home")
      yield* writeCheckout(home, { remote, key: "grove_home" })
      const inHome = path.join(home, "code")
      yield* Effect.promise(() => fs.mkdir(inHome))
      expect(Option.isNone((yield* resolve(envLayer({ home, cwd: inHome }))).credential)).toBe(true)

      const work = yield* tempDir("work")
      yield* Effect.promise(async () => {
        await fs.mkdir(path.join(work, ".grove"))
        await fs.writeFile(path.join(work, ".grove", "config.json"), "{\"key\": 1}")
      })
      const captured = captureConsole()
      const broken = yield* resolve(envLayer({ home, cwd: work })).pipe(Effect.provideService(Console.Console, captured.console))
      expect(Option.isNone(broken.credential)).toBe(true)
      expect(captured.stderr).toEqual([`warning: ignoring ${path.join(work, ".grove", "config.json")}: not a valid checkout config`])
    }))
})

describe("defaultRemote", () => {
  const session = (created_at: string) => ({ token: "grove_s", username: "alice", created_at })

  it.live("outside a checkout: the last server logged in to (the newest session), else the local default", () =>
    Effect.gen(function*() {
      const home = yield* tempDir("home")
      const layer = envLayer({ home, cwd: home })
      expect(yield* defaultRemote().pipe(Effect.provide(layer))).toBe(DEFAULT_REMOTE)
      yield* Effect.gen(function*() {
        const store = yield* CredentialStore
        yield* store.put("http://first:1", session("2026-01-02T00:00:00.000Z"))
        yield* store.put("http://older:1", session("2025-01-01T00:00:00.000Z"))
      }).pipe(Effect.provide(layer))
      expect(yield* defaultRemote().pipe(Effect.provide(layer))).toBe("http://first:1")
      // A broken credentials file leaves the local default (the command that needs a session reports it).
      yield* Effect.promise(() => fs.writeFile(path.join(home, ".grove", "credentials"), "not json", { mode: 0o600 }))
      expect(yield* defaultRemote().pipe(Effect.provide(layer))).toBe(DEFAULT_REMOTE)
    }))

  it.live("in a checkout: the checkout's server, even after a login elsewhere", () =>
    Effect.gen(function*() {
      const { layer } = yield* setup({ checkoutRemote: "http://checkout:9/" })
      expect(yield* defaultRemote().pipe(Effect.provide(layer))).toBe("http://checkout:9")
    }))
})
