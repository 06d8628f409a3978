/**
 * The last line of defence: a database failure that no handler mapped still answers 503 JSON
 * with `retryable: true` when the database could not be reached (a real PostgreSQL client
 * pointed at a port where nothing listens), whether it arrives as a failure or as a defect. A
 * database error no retry can fix stays a 500.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import * as net from "node:net"
import { JsonErrorsLive } from "./JsonErrors.ts"

const closedPort = async () => {
  const server = net.createServer()
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

const query = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`)

const routes = Layer.mergeAll(
  HttpRouter.add("GET", "/fails", Effect.as(query, HttpServerResponse.text("ok"))),
  HttpRouter.add("GET", "/dies", Effect.as(Effect.orDie(query), HttpServerResponse.text("ok"))),
  HttpRouter.add(
    "GET",
    "/bug",
    Effect.fail(new SqlError({ reason: new UnknownError({ cause: new Error("syntax error at or near"), message: "bad SQL" }) }))
  ),
  JsonErrorsLive
)

describe("JsonErrors", () => {
  it("answers an unmapped, unreachable database 503 retryable, as a failure or a defect; a SQL bug stays 500", async () => {
    const port = await closedPort()
    const database = PgClient.layer({ url: Redacted.make(`postgres://grove:grove@127.0.0.1:${port}/grove`), connectTimeout: "2 seconds" })
    const { handler, dispose } = HttpRouter.toWebHandler(routes.pipe(Layer.provideMerge(database)), { disableLogger: true })
    try {
      for (const path of ["/fails", "/dies"]) {
        const response = await handler(new Request(`http://localhost${path}`))
        expect(response.status, path).toBe(503)
        expect(await response.json()).toEqual({ error: "temporarily unavailable", code: "unavailable", retryable: true })
      }
      const bug = await handler(new Request("http://localhost/bug"))
      expect(bug.status).toBe(500)
      expect(await bug.json()).toEqual({ error: "internal server error", code: "internal" })
    } finally {
      await dispose()
    }
  }, 30_000)
})
