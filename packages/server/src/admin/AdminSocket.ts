/**
 * A local HTTP endpoint on a unix socket in the data directory (mode 0600),
 * through which `grove-server user ...` reaches a running embedded server.
 * Never exposed on TCP.
 */
import { Effect, Schema } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import type { Identity } from "../access/Identity.ts"
import { AdminFailure, createUser, CreateUserRequest, setPassword, SetPasswordRequest } from "./UserAdmin.ts"

export const socketPath = (dataDir: string) => path.join(dataDir, "admin.sock")

const readBody = (req: http.IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let size = 0
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > 65_536) {
        reject(new Error("body too large"))
        req.destroy()
      } else chunks.push(chunk)
    })
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

export const serve = (dataDir: string) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<Identity>()
    const file = socketPath(dataDir)
    const handle = async (req: http.IncomingMessage): Promise<readonly [number, unknown]> => {
      const body = await readBody(req)
      const run = <A>(effect: Effect.Effect<A, AdminFailure, Identity>) =>
        Effect.runPromiseWith(context)(
          effect.pipe(
            Effect.map((value) => [200, value] as const),
            Effect.catch((e) => Effect.succeed([e.status, { error: e.message }] as const))
          )
        )
      const decode = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
        Effect.try({
          try: () => Schema.decodeUnknownSync(schema)(JSON.parse(body)) as S["Type"],
          catch: () => new AdminFailure({ message: "invalid request body", status: 400 })
        })
      if (req.method === "POST" && req.url === "/users") {
        return run(Effect.flatMap(decode(CreateUserRequest), createUser))
      }
      if (req.method === "POST" && req.url === "/users/password") {
        return run(Effect.flatMap(decode(SetPasswordRequest), (r) => Effect.as(setPassword(r), { ok: true })))
      }
      return [404, { error: "not found" }]
    }
    const server = http.createServer((req, res) => {
      handle(req).then(
        ([status, value]) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value)),
        () => res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: "internal error" }))
      )
    })
    yield* Effect.acquireRelease(
      Effect.callback<void, Error>((resume) => {
        fs.rmSync(file, { force: true })
        server.once("error", (error) => resume(Effect.fail(error)))
        server.listen(file, () => {
          fs.chmodSync(file, 0o600)
          resume(Effect.void)
        })
      }),
      () =>
        Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        }).pipe(Effect.andThen(Effect.sync(() => fs.rmSync(file, { force: true }))))
    )
  })

/** Calls a running server's admin socket; `undefined` when no server is listening there. */
export const call = (dataDir: string, route: string, payload: unknown) =>
  new Promise<{ status: number; body: unknown } | undefined>((resolve, reject) => {
    const file = socketPath(dataDir)
    if (!fs.existsSync(file)) return resolve(undefined)
    const data = JSON.stringify(payload)
    const req = http.request(
      { socketPath: file, path: route, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) } },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          try {
            resolve({ status: res.statusCode ?? 500, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) })
          } catch (error) {
            reject(error)
          }
        })
      }
    )
    req.on("error", (error: NodeJS.ErrnoException) =>
      error.code === "ECONNREFUSED" || error.code === "ENOENT" ? resolve(undefined) : reject(error))
    req.end(data)
  })
