/**
 * Slows password guessing on the sign-in page: after 10 failures for a user
 * name within 15 minutes, that name is refused until the window passes.
 * Per node and in memory; enough to make online guessing impractical.
 */
import { Context, Effect, Layer } from "effect"

const WINDOW_MS = 15 * 60 * 1000
const MAX_FAILURES = 10

export class SignInThrottle extends Context.Service<SignInThrottle, {
  readonly allow: (username: string) => Effect.Effect<boolean>
  readonly failed: (username: string) => Effect.Effect<void>
  readonly succeeded: (username: string) => Effect.Effect<void>
}>()("grove/server/site/SignInThrottle") {
  static readonly layer = Layer.sync(SignInThrottle, () => {
    const failures = new Map<string, { count: number; since: number }>()
    const current = (username: string) => {
      const entry = failures.get(username)
      if (entry !== undefined && Date.now() - entry.since > WINDOW_MS) {
        failures.delete(username)
        return undefined
      }
      return entry
    }
    return SignInThrottle.of({
      allow: (username) => Effect.sync(() => (current(username)?.count ?? 0) < MAX_FAILURES),
      failed: (username) =>
        Effect.sync(() => {
          const entry = current(username)
          if (failures.size > 100_000) failures.clear()
          failures.set(username, entry === undefined ? { count: 1, since: Date.now() } : { ...entry, count: entry.count + 1 })
        }),
      succeeded: (username) => Effect.sync(() => void failures.delete(username))
    })
  })
}
