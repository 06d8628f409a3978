/**
 * For tests that run an entity's command handler directly against a migrated database: an outbox
 * that records what the command emits, a command context, and the runtime's way of running a
 * command (one transaction, rolled back when it fails; the outcome as a Result); an organization and
 * repository written as rows.
 */
import { Entity, EntityRuntime, MemoryBroker, MemoryBus, Outbox } from "@grove/bus"
import { Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"

/**
 * The events appended, and the Outbox layer that appends them. Rows a handler takes with `row` are
 * inserted into `event_outbox` by the handler itself: read them there.
 */
export const recordingOutbox = () => {
  const events: Array<Record<string, unknown>> = []
  const layer = Layer.succeed(Outbox.Outbox, {
    append: (event) => Effect.sync(() => {
      events.push(event as Record<string, unknown>)
      return randomUUID()
    }),
    row: (event) => {
      const id = randomUUID()
      return { eventId: id, partition: 0, topic: "grove.events", key: "test", payload: JSON.stringify({ ...event, id }) }
    },
    stored: () => {}
  })
  return { events, layer }
}

export const commandContext = (entityType: string, entityId: string, command = "test"): Entity.CommandContext => ({
  commandId: randomUUID(),
  entityType,
  entityId,
  command,
  partition: 0,
  epoch: 1,
  nodeId: "test"
})

/** Like the entity runtime: the command is one transaction, rolled back when it fails; its success without its note. */
export const runCommand = <A, E>(outbox: Layer.Layer<Outbox.Outbox>, effect: Effect.Effect<A, E, SqlClient.SqlClient | Outbox.Outbox>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(effect).pipe(Effect.map(Entity.successOf), Effect.provide(outbox), Effect.result)
  })

/** An organization `slug` and its repository `r`. */
export const repositoryRows = (slug: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const orgId = randomUUID()
    const repoId = randomUUID()
    yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug, name: slug })}`
    yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
    return { orgId, repoId, key: `${slug}/r` }
  })

/**
 * An entity runtime on an in-memory bus for tests that count a command's statements: no relay poll in the counted
 * window, and the marks of what the relay published wait (a batch of them is one statement later, not the command's).
 */
export const quietRuntime = (nodeId: string) =>
  EntityRuntime.EntityRuntime.layer({ relay: { pollInterval: Duration.hours(1), markDelay: Duration.hours(1) } }).pipe(
    Layer.provideMerge(MemoryBus.layer({ nodeId })),
    Layer.provide(MemoryBroker.MemoryBroker.layer)
  )
