import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { listen, newState, sameSecret } from "./LoginListener.ts"

const get = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    return { status: response.status, body: await response.text(), headers: response.headers }
  })

describe("LoginListener", () => {
  it("makes 32-character URL-safe states, different every time", () => {
    const a = newState()
    expect(a).toMatch(/^[A-Za-z0-9_-]{32}$/)
    expect(newState()).not.toBe(a)
    expect(sameSecret(a, a)).toBe(true)
    expect(sameSecret(a, newState())).toBe(false)
    expect(sameSecret(a, a.slice(0, 31))).toBe(false)
    expect(sameSecret("", "")).toBe(true)
  })

  it.live("listens on 127.0.0.1 and completes with the browser's callback", () =>
    Effect.gen(function*() {
      const state = newState()
      const listener = yield* listen(state)
      expect(listener.callbackUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/)
      const waiting = yield* Effect.forkChild(listener.result)

      const page = yield* get(`${listener.callbackUrl}?code=ABCDE-FGHJK&state=${state}`)
      expect(page.status).toBe(200)
      expect(page.body).toContain("You can close this tab")
      expect(page.headers.get("referrer-policy")).toBe("no-referrer")
      expect(page.headers.get("x-frame-options")).toBe("DENY")
      expect(yield* Fiber.join(waiting)).toEqual({ code: "ABCDE-FGHJK" })
    }))

  it.live("rejects a callback with another state and keeps waiting for the right one", () =>
    Effect.gen(function*() {
      const state = newState()
      const listener = yield* listen(state)
      const waiting = yield* Effect.forkChild(listener.result)

      const forged = yield* get(`${listener.callbackUrl}?code=EVILX-EVILX&state=${newState()}`)
      expect(forged.status).toBe(400)
      expect(forged.body).toContain("does not belong")
      const noState = yield* get(`${listener.callbackUrl}?code=EVILX-EVILX`)
      expect(noState.status).toBe(400)
      const noCode = yield* get(`${listener.callbackUrl}?token=grove_tok&state=${state}`)
      expect(noCode.status).toBe(400)
      const elsewhere = yield* get(listener.callbackUrl.replace("/callback", "/other"))
      expect(elsewhere.status).toBe(404)
      expect(waiting.pollUnsafe()).toBeUndefined()

      yield* get(`${listener.callbackUrl}?code=GOODX-GOODX&state=${state}`)
      expect(yield* Fiber.join(waiting)).toEqual({ code: "GOODX-GOODX" })
    }))

  it.live("stops listening when its scope closes", () =>
    Effect.gen(function*() {
      const url = yield* Effect.scoped(Effect.map(listen(newState()), (l) => l.callbackUrl))
      const refused = yield* Effect.promise(() => fetch(url).then(() => false, () => true))
      expect(refused).toBe(true)
    }))
})
