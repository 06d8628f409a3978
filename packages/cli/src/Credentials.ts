/**
 * Login sessions in `~/.grove/credentials`: a JSON object keyed by normalised
 * server URL. The directory is 0700 and the file 0600; writes go to a temp
 * file that is renamed over the old one, so a crash never leaves half a file.
 */
import { Console, Context, Effect, Layer, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { CliEnv } from "./CliEnv.ts"
import { CliFailure, failure } from "./Failures.ts"

import { lastLoginIn, parseSessions, type StoredSession } from "./SessionFile.ts"

export type { StoredSession } from "./SessionFile.ts"

export interface CredentialStoreShape {
  /** The credentials file. */
  readonly path: string
  /** The session for a normalised server URL. */
  readonly get: (remote: string) => Effect.Effect<Option.Option<StoredSession>, CliFailure>
  readonly put: (remote: string, session: StoredSession) => Effect.Effect<void, CliFailure>
  /** True when a session was there. */
  readonly remove: (remote: string) => Effect.Effect<boolean, CliFailure>
  /** The server of the newest session (the last `grove login`); none when there is none or the file is unreadable. */
  readonly lastLogin: Effect.Effect<Option.Option<string>>
}

const ioFailure = (what: string, file: string) => (error: unknown) =>
  failure(`cannot ${what} ${file}: ${error instanceof Error ? error.message : String(error)}`, "credentials_file")

const isMissing = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT"

export class CredentialStore extends Context.Service<CredentialStore, CredentialStoreShape>()("grove/cli/CredentialStore") {
  static readonly layer = Layer.effect(
    CredentialStore,
    Effect.gen(function*() {
      const { home } = yield* CliEnv
      const dir = path.join(home, ".grove")
      const file = path.join(dir, "credentials")
      let warned = false

      const readAll = Effect.gen(function*() {
        const loaded = yield* Effect.tryPromise({
          try: async () => {
            const handle = await fs.open(file, "r")
            try {
              return { mode: (await handle.stat()).mode, text: await handle.readFile("utf8") }
            } finally {
              await handle.close()
            }
          },
          catch: (error) => error
        }).pipe(
          Effect.map(Option.some),
          Effect.catch((error) => isMissing(error) ? Effect.succeedNone : Effect.fail(ioFailure("read", file)(error)))
        )
        if (Option.isNone(loaded)) return {}
        // Like ssh with its keys: a session readable by others is a leaked session. Warn, and the
        // next write puts the file back to 0600.
        if ((loaded.value.mode & 0o077) !== 0 && !warned) {
          warned = true
          yield* Console.error(
            `warning: ${file} is accessible by other users (mode ${(loaded.value.mode & 0o777).toString(8)}); run: chmod 600 ${file}`
          )
        }
        const decoded = parseSessions(loaded.value.text)
        if (decoded === undefined) {
          return yield* failure(`${file} is not a valid credentials file; fix or delete it and run grove login`, "credentials_file")
        }
        return decoded
      })

      const writeAll = (sessions: Record<string, StoredSession>) =>
        Effect.tryPromise({
          try: async () => {
            await fs.mkdir(dir, { recursive: true, mode: 0o700 })
            await fs.chmod(dir, 0o700)
            const temp = path.join(dir, `.credentials.${process.pid}.${randomBytes(6).toString("hex")}.tmp`)
            try {
              await fs.writeFile(temp, `${JSON.stringify(sessions, null, 2)}\n`, { mode: 0o600, flag: "wx" })
              await fs.rename(temp, file)
            } catch (error) {
              await fs.rm(temp, { force: true })
              throw error
            }
          },
          catch: ioFailure("write", file)
        })

      return CredentialStore.of({
        path: file,
        get: (remote) => Effect.map(readAll, (all) => Option.fromNullishOr(all[remote])),
        put: (remote, session) => Effect.flatMap(readAll, (all) => writeAll({ ...all, [remote]: session })),
        remove: (remote) =>
          Effect.flatMap(readAll, (all) => {
            if (!(remote in all)) return Effect.succeed(false)
            const { [remote]: _, ...rest } = all
            return Effect.as(writeAll(rest), true)
          })
        ,
        // A broken file is reported by the command that needs a session, not by every command.
        lastLogin: readAll.pipe(
          Effect.map((all) => Option.fromUndefinedOr(lastLoginIn(all))),
          Effect.orElseSucceed(() => Option.none<string>())
        )
      })
    })
  )
}
