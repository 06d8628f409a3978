import { describe, expect, it } from "@effect/vitest"
import { Console, Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { captureConsole, closedPort, envLayer, scriptedInteraction, tempDir } from "../../test/support.ts"
import { CredentialStore } from "../Credentials.ts"
import { CliFailure } from "../Failures.ts"
import { Output } from "../Output.ts"
import { login } from "./Login.ts"

const setup = (answers: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const home = yield* tempDir("home")
    const captured = captureConsole()
    // No PATH: no browser opener is found, so none is started.
    const layer = Layer.mergeAll(envLayer({ home, cwd: home }), scriptedInteraction(false, answers).layer, Output.layer(false))
    const remote = `http://127.0.0.1:${yield* closedPort}`
    const runLogin = (headless: boolean, timeout: Duration.Input = "2 seconds") =>
      login(remote, { headless, timeout }).pipe(Effect.provide(layer), Effect.provideService(Console.Console, captured.console))
    const stored = Effect.gen(function*() {
      return yield* (yield* CredentialStore).get(remote)
    }).pipe(Effect.provide(layer))
    return { remote, captured, runLogin, stored }
  })

const failureOf = (exit: Exit.Exit<unknown, CliFailure>) => {
  const reason = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
  if (reason?._tag !== "Fail") throw new Error("expected a failure")
  return reason.error
}

/** The sign-in address printed on stderr, once it is there. */
const printedUrl = (stderr: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const match = stderr.join("\n").match(/(http:\/\/\S+\/cli-auth\?\S+)/)
      if (match !== null) return new URL(match[1]!)
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.die(`no sign-in address printed: ${stderr.join("\n")}`)
  })

describe("grove login (browser)", () => {
  it.live("prints {remote}/cli-auth with a loopback callback and a fresh state; a callback with the right state completes", () =>
    Effect.gen(function*() {
      const { captured, remote, runLogin, stored } = yield* setup()
      const fiber = yield* Effect.forkChild(Effect.exit(runLogin(false)))
      const url = yield* printedUrl(captured.stderr)
      expect(`${url.origin}${url.pathname}`).toBe(`${remote}/cli-auth`)
      const callback = url.searchParams.get("callback")!
      const state = url.searchParams.get("state")!
      expect(callback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/)
      expect(state).toMatch(/^[A-Za-z0-9_-]{32}$/)

      // The browser, redirected by the sign-in page.
      const page = yield* Effect.promise(() => fetch(`${callback}?code=ABCDE-FGHJK&state=${state}`).then((r) => r.text()))
      expect(page).toContain("You can close this tab")

      // The code is exchanged for the session before anything is kept: this server is not there.
      const failure = failureOf(yield* Fiber.join(fiber))
      expect(failure).toMatchObject({ exitCode: 6, code: "network" })
      expect(yield* stored).toEqual(Option.none())
      // The listener is gone.
      expect(yield* Effect.promise(() => fetch(callback).then(() => "open", () => "closed"))).toBe("closed")
    }))

  it.live("gives up after the timeout with a clear message (exit 6)", () =>
    Effect.gen(function*() {
      const { runLogin } = yield* setup()
      const failure = failureOf(yield* Effect.exit(runLogin(false, "300 millis")))
      expect(failure).toMatchObject({ exitCode: 6, code: "login_timeout" })
      expect(failure.message).toMatch(/^no sign-in arrived within 300ms; run grove login again/)
    }))
})

describe("grove login --headless", () => {
  it.live("prints {remote}/cli-auth and fails with exit 6 when no code is given", () =>
    Effect.gen(function*() {
      const { captured, remote, runLogin } = yield* setup([])
      const failure = failureOf(yield* Effect.exit(runLogin(true)))
      expect(failure).toMatchObject({ exitCode: 6, code: "no_code" })
      expect(captured.stderr.join("\n")).toContain(`  ${remote}/cli-auth\n`)
    }))

  it.live("sends the pasted code (trimmed) to the server", () =>
    Effect.gen(function*() {
      const { runLogin } = yield* setup(["  ABCD-1234  "])
      // No server: the exchange cannot connect.
      expect(failureOf(yield* Effect.exit(runLogin(true)))).toMatchObject({ exitCode: 6, code: "network" })
    }))
})
