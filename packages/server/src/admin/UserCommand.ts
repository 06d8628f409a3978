/**
 * `grove-server user create|passwd`. With a running embedded server the
 * command goes through its admin socket (only one process may open the data
 * directory); otherwise it opens the database itself.
 */
import { Effect, Layer } from "effect"
import * as path from "node:path"
import * as readline from "node:readline"
import { ConfigError, parseConfig, type ServerConfigShape } from "../Config.ts"
import { AccessCaches } from "../cache/AccessCaches.ts"
import { Identity } from "../access/Identity.ts"
import { databaseLayer } from "../Infrastructure.ts"
import * as AdminSocket from "./AdminSocket.ts"
import * as DataDirLock from "./DataDirLock.ts"
import { AdminFailure, createUser, setPassword } from "./UserAdmin.ts"

const USER_USAGE = `  grove-server user create <name> [--admin] [--password-stdin] [options]
  grove-server user passwd <name> [options]   (the password is read from stdin)
`

const readPassword = async (prompt: string): Promise<string> => {
  const input = process.stdin
  const rl = readline.createInterface({ input, output: process.stderr, terminal: input.isTTY === true })
  if (input.isTTY) {
    process.stderr.write(prompt)
    // Keep the password off the screen.
    ;(rl as unknown as { _writeToOutput: (s: string) => void })._writeToOutput = () => {}
  }
  const line = await new Promise<string>((resolve) => {
    rl.once("line", resolve)
    rl.once("close", () => resolve(""))
  })
  rl.close()
  if (input.isTTY) process.stderr.write("\n")
  return line.replace(/\r?\n$/, "")
}

type Request =
  | { readonly route: "/users"; readonly body: { username: string; admin: boolean; password?: string } }
  | { readonly route: "/users/password"; readonly body: { username: string; password: string } }

/** Runs the request against the database directly (no server holds the data directory). */
const runDirect = (config: ServerConfigShape, request: Request): Promise<{ status: number; body: unknown }> => {
  const program: Effect.Effect<unknown, AdminFailure, Identity> = request.route === "/users"
    ? createUser(request.body)
    : Effect.as(setPassword(request.body), { ok: true })
  const lock = config.mode === "embedded" ? Layer.effectDiscard(DataDirLock.acquire(config.dataDir)) : Layer.empty
  const layer = Identity.layer.pipe(Layer.provide([databaseLayer(config), AccessCaches.layer]), Layer.provide(lock))
  return Effect.runPromise(
    program.pipe(
      Effect.map((body) => ({ status: 200, body })),
      Effect.provide(layer),
      Effect.catch((e) =>
        Effect.succeed(
          e._tag === "AdminFailure"
            ? { status: e.status, body: { error: e.message } as unknown }
            : { status: 409, body: { error: `the data directory is in use by process ${e.pid}, but its admin socket does not answer` } as unknown }
        )
      )
    )
  )
}

export const runUserCommand = async (argv: ReadonlyArray<string>): Promise<number> => {
  const [sub, name, ...rest] = argv
  if (sub !== "create" && sub !== "passwd") {
    process.stderr.write(`usage:\n${USER_USAGE}`)
    return 2
  }
  if (name === undefined || name.startsWith("-")) {
    process.stderr.write(`grove-server user ${sub}: a user name is required\n`)
    return 2
  }
  const admin = rest.includes("--admin")
  const passwordStdin = rest.includes("--password-stdin")
  const flags = rest.filter((a) => a !== "--admin" && a !== "--password-stdin")
  if (sub === "passwd" && (admin || passwordStdin)) {
    process.stderr.write("grove-server user passwd: unexpected option\n")
    return 2
  }
  let config: ServerConfigShape
  try {
    config = parseConfig(flags, process.env)
  } catch (error) {
    process.stderr.write(`grove-server: ${error instanceof ConfigError ? error.message : String(error)}\n`)
    return 2
  }
  let request: Request
  if (sub === "create") {
    const password = passwordStdin ? await readPassword("Password: ") : undefined
    request = { route: "/users", body: { username: name, admin, ...(password === undefined ? {} : { password }) } }
  } else {
    request = { route: "/users/password", body: { username: name, password: await readPassword("New password: ") } }
  }
  const viaSocket = config.mode === "embedded" ? await AdminSocket.call(config.dataDir, request.route, request.body) : undefined
  const result = viaSocket ?? await runDirect(config, request)
  const body = result.body as { error?: string; username?: string; is_admin?: boolean; api_key?: string }
  if (result.status !== 200) {
    process.stderr.write(`grove-server: ${body.error ?? "failed"}\n`)
    return 1
  }
  if (config.mode === "embedded") {
    // The user lands in this directory's database: say which, so that a server started with
    // another --data-dir (or from another folder) is not a mystery.
    const dir = path.resolve(config.dataDir)
    process.stdout.write(
      viaSocket === undefined
        ? `No server is using the data directory ${dir}: opened it directly.\n`
        : `Through the server using the data directory ${dir}.\n`
    )
  }
  if (sub === "create") {
    process.stdout.write(`Created user ${body.username}${body.is_admin ? " (admin)" : ""} with personal organization ${body.username}.\n`)
    process.stdout.write(`Personal API key (shown once; use it as SERVICE_API_KEY or sign in with 'grove login'):\n`)
    process.stdout.write(`${body.api_key}\n`)
  } else {
    process.stdout.write(`Password set for ${name}.\n`)
  }
  return 0
}
