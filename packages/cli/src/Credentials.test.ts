import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Exit, Option } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { captureConsole, envLayer, tempDir } from "../test/support.ts"
import { CredentialStore } from "./Credentials.ts"

const remote = "http://127.0.0.1:8080"
const session = { token: "grove_session", username: "alice", expires_at: "2099-01-01T00:00:00.000Z", created_at: "2025-01-01T00:00:00.000Z" }

const withStore = <A, E>(body: (store: CredentialStore["Service"], home: string) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const home = yield* tempDir("home")
    return yield* Effect.gen(function*() {
      return yield* body(yield* CredentialStore, home)
    }).pipe(Effect.provide(envLayer({ home, cwd: home })))
  })

const mode = (file: string) => Effect.promise(() => fs.stat(file)).pipe(Effect.map((s) => s.mode & 0o777))

describe("CredentialStore", () => {
  it.live("stores sessions keyed by server in ~/.grove/credentials, 0600 in a 0700 directory", () =>
    withStore((store, home) =>
      Effect.gen(function*() {
        expect(store.path).toBe(path.join(home, ".grove", "credentials"))
        expect(yield* store.get(remote)).toEqual(Option.none())
        yield* store.put(remote, session)
        yield* store.put("http://other:1", { ...session, token: "grove_other" })
        expect(yield* store.get(remote)).toEqual(Option.some(session))
        expect(yield* mode(store.path)).toBe(0o600)
        expect(yield* mode(path.join(home, ".grove"))).toBe(0o700)
        const onDisk = JSON.parse(yield* Effect.promise(() => fs.readFile(store.path, "utf8")))
        expect(Object.keys(onDisk).sort()).toEqual(["http://127.0.0.1:8080", "http://other:1"])
        // Written through a temp file and a rename: nothing else is left in the directory.
        expect(yield* Effect.promise(() => fs.readdir(path.join(home, ".grove")))).toEqual(["credentials"])

        expect(yield* store.remove(remote)).toBe(true)
        expect(yield* store.remove(remote)).toBe(false)
        expect(yield* store.get(remote)).toEqual(Option.none())
        expect(Option.map(yield* store.get("http://other:1"), (s) => s.token)).toEqual(Option.some("grove_other"))
      })
    ))

  it.live("tightens an existing ~/.grove to 0700 on write", () =>
    withStore((store, home) =>
      Effect.gen(function*() {
        yield* Effect.promise(() => fs.mkdir(path.join(home, ".grove"), { mode: 0o755 }))
        yield* store.put(remote, session)
        expect(yield* mode(path.join(home, ".grove"))).toBe(0o700)
      })
    ))

  it.live("warns about a file other users can read, still reads it, and the next write makes it 0600", () =>
    withStore((store) =>
      Effect.gen(function*() {
        yield* store.put(remote, session)
        yield* Effect.promise(() => fs.chmod(store.path, 0o644))
        const captured = captureConsole()
        const read = yield* store.get(remote).pipe(Effect.provideService(Console.Console, captured.console))
        expect(read).toEqual(Option.some(session))
        expect(captured.stderr.join("\n")).toMatch(/accessible by other users \(mode 644\).*chmod 600/)
        yield* store.put(remote, { ...session, token: "grove_new" }).pipe(Effect.provideService(Console.Console, captured.console))
        expect(yield* mode(store.path)).toBe(0o600)
      })
    ))

  it.live("fails with a clear message on a corrupt file", () =>
    withStore((store, home) =>
      Effect.gen(function*() {
        yield* Effect.promise(() => fs.mkdir(path.join(home, ".grove"), { mode: 0o700 }))
        yield* Effect.promise(() => fs.writeFile(store.path, "{not json", { mode: 0o600 }))
        const exit = yield* Effect.exit(store.get(remote))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("is not a valid credentials file")
      })
    ))
})
