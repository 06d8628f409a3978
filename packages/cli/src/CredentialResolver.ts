/**
 * Which token a command sends, in the spec's order (Authentication, rule 7):
 * 1. the `SERVICE_API_KEY` environment variable;
 * 2. the key stored in the current checkout, only if that checkout is bound to
 *    the server being addressed;
 * 3. the login session for that server from `~/.grove/credentials`.
 * The losers are kept with the reason they lost, for `grove auth status`.
 */
import { Clock, Effect, Option } from "effect"
import { findCheckout } from "./Checkout.ts"
import { CliEnv } from "./CliEnv.ts"
import { CredentialStore } from "./Credentials.ts"
import { DEFAULT_REMOTE, normaliseRemote, sameRemote } from "./Remote.ts"

export type CredentialSource = "env" | "checkout" | "session"

export interface Credential {
  readonly source: CredentialSource
  readonly token: string
  /** `SERVICE_API_KEY`, the checkout's config file, or the credentials file. */
  readonly location: string
  /** For a login session: who signed in and until when. */
  readonly username?: string | undefined
  readonly expiresAt?: string | undefined
}

export interface Passed {
  readonly source: CredentialSource
  readonly location: string
  readonly reason: string
}

export interface Resolution {
  readonly remote: string
  readonly credential: Option.Option<Credential>
  /** Credentials that exist but were not chosen, and why. */
  readonly passed: ReadonlyArray<Passed>
}

export const resolveCredential = Effect.fn("CredentialResolver.resolve")(function*(remote: string) {
  const { cwd, env, home } = yield* CliEnv
  const store = yield* CredentialStore
  const found: Array<Credential> = []
  const passed: Array<Passed> = []

  const fromEnv = env["SERVICE_API_KEY"]
  if (fromEnv !== undefined && fromEnv !== "") found.push({ source: "env", token: fromEnv, location: "SERVICE_API_KEY" })

  const checkout = yield* findCheckout(cwd, home)
  if (Option.isSome(checkout) && checkout.value.config.key !== undefined) {
    const { config, configPath } = checkout.value
    if (sameRemote(config.remote, remote)) {
      found.push({ source: "checkout", token: config.key!, location: configPath })
    } else {
      passed.push({ source: "checkout", location: configPath, reason: `bound to ${config.remote}, not this server` })
    }
  }

  const session = yield* store.get(remote)
  if (Option.isSome(session)) {
    const { expires_at, token, username } = session.value
    const now = yield* Clock.currentTimeMillis
    if (expires_at !== undefined && Date.parse(expires_at) <= now) {
      passed.push({ source: "session", location: store.path, reason: `login session of ${username} expired at ${expires_at}` })
    } else {
      found.push({ source: "session", token, location: store.path, username, expiresAt: expires_at })
    }
  }

  const [winner, ...rest] = found
  for (const loser of rest) {
    passed.push({ source: loser.source, location: loser.location, reason: `overridden by ${describeSource(winner!)}` })
  }
  return { remote, credential: Option.fromUndefinedOr(winner), passed } satisfies Resolution
})

export const describeSource = (credential: { readonly source: CredentialSource; readonly location: string }): string => {
  switch (credential.source) {
    case "env":
      return "the SERVICE_API_KEY environment variable"
    case "checkout":
      return `the key stored in the checkout (${credential.location})`
    case "session":
      return `the login session in ${credential.location}`
  }
}

/**
 * The server when neither `--remote` nor `GROVE_REMOTE` names one: in a checkout its server, elsewhere the
 * last server logged in to (`~/.grove/credentials` keeps it with the session), else the local default.
 */
export const defaultRemote = Effect.fn("CredentialResolver.defaultRemote")(function*() {
  const { cwd, home } = yield* CliEnv
  const checkout = yield* findCheckout(cwd, home)
  const bound = Option.flatMap(checkout, (c) => Option.fromUndefinedOr(normaliseRemote(c.config.remote)))
  if (Option.isSome(bound)) return bound.value
  const store = yield* CredentialStore
  return Option.getOrElse(yield* store.lastLogin, () => DEFAULT_REMOTE)
})
