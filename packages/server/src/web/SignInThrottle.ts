/**
 * Slows password guessing on the sign-in page with growing delays, counted
 * per user name and client address together, so guesses from one address
 * never lock the owner out from theirs:
 * - a (name, address) pair gets 3 free failures; after the n-th failure the
 *   next attempt must wait 2^(n-3) seconds (at most 15 minutes);
 * - one address gets 20 free failures over all names, then the same doubling,
 *   so spraying many names from one address is slowed too.
 * A success clears its pair. Entries are forgotten a day after their last
 * failure. Per node and in memory; enough to make online guessing impractical.
 */
import { Context, Effect, Layer } from "effect"

const FORGET_MS = 24 * 3600 * 1000
const MAX_DELAY_MS = 15 * 60 * 1000
const FREE_PER_PAIR = 3
const FREE_PER_ADDRESS = 20
const MAX_ENTRIES = 100_000

interface Entry {
  readonly count: number
  readonly last: number
}

/** The wait after `count` failures with `free` of them free, in milliseconds. */
export const delayAfter = (count: number, free: number): number =>
  count < free ? 0 : Math.min(MAX_DELAY_MS, 1000 * 2 ** (count - free))

export type Verdict =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly retryAfterSeconds: number }

export class SignInThrottle extends Context.Service<SignInThrottle, {
  readonly check: (username: string, address: string) => Effect.Effect<Verdict>
  readonly failed: (username: string, address: string) => Effect.Effect<void>
  readonly succeeded: (username: string, address: string) => Effect.Effect<void>
}>()("grove/server/site/SignInThrottle") {
  static readonly make = (now: () => number = Date.now) => {
    const pairs = new Map<string, Entry>()
    const addresses = new Map<string, Entry>()
    const pairKey = (username: string, address: string) => `${address}\u0000${username.toLowerCase()}`
    const current = (map: Map<string, Entry>, key: string) => {
      const entry = map.get(key)
      if (entry !== undefined && now() - entry.last > FORGET_MS) {
        map.delete(key)
        return undefined
      }
      return entry
    }
    const waitFor = (entry: Entry | undefined, free: number) =>
      entry === undefined ? 0 : Math.max(0, entry.last + delayAfter(entry.count, free) - now())
    const bump = (map: Map<string, Entry>, key: string) => {
      const entry = current(map, key)
      if (map.size > MAX_ENTRIES) map.clear()
      map.set(key, { count: (entry?.count ?? 0) + 1, last: now() })
    }
    return SignInThrottle.of({
      check: (username, address) =>
        Effect.sync((): Verdict => {
          const wait = Math.max(
            waitFor(current(pairs, pairKey(username, address)), FREE_PER_PAIR),
            waitFor(current(addresses, address), FREE_PER_ADDRESS)
          )
          return wait === 0 ? { allowed: true } : { allowed: false, retryAfterSeconds: Math.ceil(wait / 1000) }
        }),
      failed: (username, address) =>
        Effect.sync(() => {
          bump(pairs, pairKey(username, address))
          bump(addresses, address)
        }),
      succeeded: (username, address) => Effect.sync(() => void pairs.delete(pairKey(username, address)))
    })
  }

  static readonly layer = Layer.sync(SignInThrottle, () => SignInThrottle.make())
}
