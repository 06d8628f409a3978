/**
 * `grove auth status`: which credential wins for this server (spec,
 * Authentication rule 7) and who the server says it is.
 */
import { ApiErrors, type ApiSchemas } from "@grove/api"
import { Effect, Option } from "effect"
import { connectWith } from "../Client.ts"
import type { Credential, Passed } from "../CredentialResolver.ts"
import { describeSource, resolveCredential } from "../CredentialResolver.ts"
import { CliFailure, ExitCode } from "../Failures.ts"
import { Output } from "../Output.ts"

const passedLines = (passed: ReadonlyArray<Passed>) =>
  passed.length === 0 ? "" : `\nNot used:\n${passed.map((p) => `  - ${describeSource(p)}: ${p.reason}`).join("\n")}`

const passedJson = (passed: ReadonlyArray<Passed>) => passed.map(({ location, reason, source }) => ({ source, location, reason }))

const credentialJson = (credential: Credential) => ({ source: credential.source, location: credential.location })

const describeWhoami = (whoami: ApiSchemas.Whoami): string => {
  const who = whoami.kind === "user"
    ? `user ${whoami.name}${whoami.is_admin ? " (server admin)" : ""}`
    : `service account ${whoami.name}${whoami.organization === undefined ? "" : ` of ${whoami.organization}`}`
  const token = whoami.token
  return [
    `Signed in as: ${who}`,
    `Token:        ${token.kind === "session" ? "login session" : token.kind === "personal" ? "personal API key" : "service-account key"}`,
    `Scopes:       ${token.scopes.length === 0 ? "(none)" : token.scopes.join(", ")}`,
    `Repository:   ${token.repo ?? "any (not limited to one repository)"}`,
    `Expires:      ${token.expires_at ?? "never (until revoked)"}`
  ].join("\n")
}

export const authStatus = Effect.fn("AuthStatus.run")(function*(remote: string) {
  const out = yield* Output
  const resolution = yield* resolveCredential(remote)
  if (Option.isNone(resolution.credential)) {
    return yield* new CliFailure({
      message: `no credential for ${remote}: run grove login, or set SERVICE_API_KEY${passedLines(resolution.passed)}`,
      exitCode: ExitCode.auth,
      code: "no_credential",
      details: { remote, credential: null, passed: passedJson(resolution.passed) }
    })
  }
  const credential = resolution.credential.value
  const connection = yield* connectWith(resolution)
  const whoami = yield* connection.call(connection.client.system.whoami().pipe(
    Effect.catchIf(
      (error): error is ApiErrors.Unauthorized => error instanceof ApiErrors.Unauthorized,
      (rejected) =>
        Effect.fail(
          new CliFailure({
            message: `${remote} rejected ${describeSource(credential)}: ${rejected.error}${passedLines(resolution.passed)}`,
            exitCode: ExitCode.auth,
            code: rejected.code ?? "unauthorized",
            details: { remote, credential: credentialJson(credential), passed: passedJson(resolution.passed) }
          })
        )
    )
  ))
  yield* out.result(
    { remote, credential: credentialJson(credential), whoami, passed: passedJson(resolution.passed) },
    () => `Server:       ${remote}\nCredential:   ${describeSource(credential)}\n${describeWhoami(whoami)}${passedLines(resolution.passed)}`
  )
})
