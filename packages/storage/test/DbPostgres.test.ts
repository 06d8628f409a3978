import { assert } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type PostgresServer, startPostgres } from "../../../scripts/infra/postgres.ts"
import * as DbPostgres from "../src/DbPostgres.ts"
import { dbContract } from "./Db.contract.ts"

class Server extends Context.Service<Server, PostgresServer>()("test/DbPostgres/Server") {}

const TestLayer = Layer.unwrap(Effect.map(startPostgres(), (server) =>
  Layer.merge(DbPostgres.layer({ url: server.url }), Layer.succeed(Server, server))))

dbContract("PostgreSQL", TestLayer, {}, (it) => {
  it.effect("building the layer fails with a typed SqlError on wrong credentials or an unreachable server", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const wrongPassword = server.url.replace(server.password, "wrong")
      const denied = yield* Effect.flip(Layer.build(DbPostgres.layer({ url: wrongPassword })).pipe(Effect.scoped))
      assert.strictEqual(denied.reason._tag, "AuthenticationError")
      const closed = yield* Effect.flip(
        Layer.build(DbPostgres.layer({ url: "postgres://postgres:x@127.0.0.1:1/grove", connectTimeout: "2 seconds" }))
          .pipe(Effect.scoped)
      )
      assert.strictEqual(closed.reason._tag, "ConnectionError")
    }))
})
