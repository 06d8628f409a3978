/**
 * `grove login` and `grove logout`.
 *
 * Browser login: a loopback listener gets a one-time code from the sign-in
 * page's redirect (never the token: that address stays in the browser's
 * history). Headless login: the sign-in page shows the one-time code for the
 * user to paste. Either way the code is exchanged at
 * `POST /api/cli-auth/exchange` and the session confirmed with
 * `GET /api/whoami` before it is stored.
 */
import { ApiErrors } from "@grove/api"
import { Clock, Duration, Effect, Option } from "effect"
import { spawn } from "node:child_process"
import { accessSync, constants } from "node:fs"
import * as path from "node:path"
import { CliEnv } from "../CliEnv.ts"
import { connectWith, makeClient, toFailure } from "../Client.ts"
import { CredentialStore } from "../Credentials.ts"
import { describeSource, resolveCredential } from "../CredentialResolver.ts"
import { authFailure } from "../Failures.ts"
import { Interaction } from "../Interaction.ts"
import { listen, newState } from "../LoginListener.ts"
import { Output } from "../Output.ts"

export const LOGIN_TIMEOUT: Duration.Input = "5 minutes"

const onPath = (command: string, env: Readonly<Record<string, string | undefined>>): string | undefined => {
  for (const dir of (env["PATH"] ?? "").split(path.delimiter)) {
    if (dir === "") continue
    const candidate = path.join(dir, command)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/** Best effort: the address is printed anyway, so a missing opener is not an error. */
const openBrowser = (url: string) =>
  Effect.gen(function*() {
    const { env } = yield* CliEnv
    const opener = onPath(process.platform === "darwin" ? "open" : "xdg-open", env)
    if (opener === undefined) return false
    return yield* Effect.sync(() => {
      try {
        const child = spawn(opener, [url], { stdio: "ignore", detached: true })
        child.on("error", () => {})
        child.unref()
        return true
      } catch {
        return false
      }
    })
  })

/** Exchanges a one-time code of the sign-in page for a login session. */
const exchangeCode = (remote: string, code: string, retry: string) =>
  Effect.gen(function*() {
    const client = yield* makeClient(remote, undefined)
    const context = { remote, credential: Option.none() }
    const exchanged = yield* client.cliAuth.exchange({ payload: { code } }).pipe(
      Effect.catch((error) =>
        Effect.flatMap(
          error instanceof ApiErrors.NotFound
            ? Effect.succeed(authFailure(
              `the one-time code is wrong, already used or expired; run ${retry} again`,
              error.code ?? "invalid_code"
            ))
            : toFailure(error, context),
          Effect.fail
        )
      )
    )
    return { token: exchanged.token, expiresAt: exchanged.expires_at as string | undefined }
  })

const browserLogin = (remote: string, timeout: Duration.Input) =>
  Effect.scoped(Effect.gen(function*() {
    const out = yield* Output
    const state = newState()
    const listener = yield* listen(state)
    const url = `${remote}/cli-auth?callback=${encodeURIComponent(listener.callbackUrl)}&state=${state}`
    yield* out.note(`To sign in, open this address in your browser:\n\n  ${url}\n`)
    if (yield* openBrowser(url)) yield* out.note("(opening it in your browser)")
    yield* out.note("Waiting for the browser to finish signing in... (Ctrl-C to cancel)")
    const callback = yield* listener.result.pipe(
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () =>
          Effect.fail(authFailure(
            `no sign-in arrived within ${Duration.format(Duration.fromInputUnsafe(timeout))}; run grove login again (or grove login --headless on a machine without a browser)`,
            "login_timeout"
          ))
      })
    )
    return yield* exchangeCode(remote, callback.code, "grove login")
  }))

const headlessLogin = (remote: string) =>
  Effect.gen(function*() {
    const out = yield* Output
    const interaction = yield* Interaction
    yield* out.note(`To sign in, open this address in a browser (on any machine) and sign in:\n\n  ${remote}/cli-auth\n`)
    const line = yield* interaction.readLine("Then paste the one-time code here: ")
    const code = Option.getOrElse(line, () => "").trim()
    if (code === "") return yield* authFailure("no one-time code given", "no_code")
    return yield* exchangeCode(remote, code, "grove login --headless")
  })

export const login = Effect.fn("Login.login")(function*(remote: string, options: {
  readonly headless: boolean
  readonly timeout?: Duration.Input | undefined
}) {
  const out = yield* Output
  const store = yield* CredentialStore
  const obtained = options.headless ? yield* headlessLogin(remote) : yield* browserLogin(remote, options.timeout ?? LOGIN_TIMEOUT)

  // Confirm the new session before keeping it.
  const confirm = yield* connectWith({
    remote,
    credential: Option.some({ source: "session", token: obtained.token, location: "the new login session" }),
    passed: []
  })
  const whoami = yield* confirm.call(confirm.client.system.whoami())
  const expiresAt = whoami.token.expires_at ?? obtained.expiresAt
  const now = yield* Clock.currentTimeMillis
  yield* store.put(remote, {
    token: obtained.token,
    username: whoami.name,
    ...(expiresAt === undefined ? {} : { expires_at: expiresAt }),
    created_at: new Date(now).toISOString()
  })

  // The stored session only counts when nothing earlier in the order is set.
  const resolution = yield* resolveCredential(remote)
  if (Option.isSome(resolution.credential) && resolution.credential.value.source !== "session") {
    yield* out.note(`note: ${describeSource(resolution.credential.value)} takes precedence over this session`)
  }
  yield* out.result(
    { remote, username: whoami.name, expires_at: expiresAt ?? null, credentials_file: store.path, whoami },
    () => `Signed in to ${remote} as ${whoami.name}${expiresAt === undefined ? "" : ` (the session expires ${expiresAt})`}.`
  )
})

/**
 * Deletes the stored session. The API has no endpoint to revoke a login session
 * yet, so the token stays valid on the server until it expires; it is only
 * forgotten here.
 */
export const logout = Effect.fn("Login.logout")(function*(remote: string) {
  const out = yield* Output
  const store = yield* CredentialStore
  const removed = yield* store.remove(remote)
  yield* out.result(
    { remote, removed },
    () => removed ? `Signed out of ${remote} (the session was deleted from this machine).` : `Not signed in to ${remote}.`
  )
})
