// TEMPORARY (not committed): runs commands in a local transaction until the entity runtime lands.
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Operations } from "./Operations.ts"
import * as Commands from "./RepositoryCommands.ts"
import { CommandUnavailable, RepositoryGateway } from "./RepositoryGateway.ts"

export const RepositoryEntityLive = Layer.mergeAll(
  Layer.effect(RepositoryGateway, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events: Commands.EventSink = { emit: () => Effect.void }
    const run = <A, E>(e: Effect.Effect<A, E, SqlClient.SqlClient>) =>
      sql.withTransaction(e).pipe(
        Effect.catchTag("SqlError" as never, (err: { message: string }) => Effect.fail(new CommandUnavailable({ message: err.message }))),
        Effect.provideService(SqlClient.SqlClient, sql)
      ) as Effect.Effect<A, E | CommandUnavailable>
    return RepositoryGateway.of({
      create: (id, p) => run(Commands.create(id, p, events)),
      remove: (id, p) => run(Commands.remove(id, p, events)),
      setVisibility: (id, p) => run(Commands.setVisibility(id, p, events)),
      transfer: (id, p) => run(Commands.transfer(id, p, events))
    }) as never
  })),
  Layer.succeed(Operations, Operations.of({ get: () => Effect.die("not yet") }))
)
