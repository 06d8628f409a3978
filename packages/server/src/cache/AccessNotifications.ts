/**
 * Keeps this node's access caches exact: every notification on `ACCESS_CHANNEL` (sent by the
 * database's triggers in the changing transaction) forgets what it concerns (`AccessCaches.changed`).
 * - Embedded: PGlite's notifications are read from its output in this process (`DbEmbedded.Notifications`),
 *   before the notifying COMMIT answers.
 * - Cluster: one LISTEN connection per node.
 * The caches are on only while notifications arrive: off until the first LISTEN is confirmed, and
 * off again (every read goes to the database) from the moment the connection fails until a new
 * LISTEN is confirmed, when they start again empty: what changed meanwhile was never seen here. A
 * connection that dies silently (no error, no more notifications) is caught by a ping this node
 * sends itself on the channel every `PING_EVERY_MS`: one not back by the next ping turns the caches
 * off and listens again.
 */
import { PgClient } from "@effect/sql-pg"
import { DbEmbedded } from "@grove/storage"
import { Cause, Data, Effect, Layer, Option, Queue, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { ACCESS_CHANNEL, AccessCaches } from "./AccessCaches.ts"

export const PING_EVERY_MS = 5_000
/** How soon a lost LISTEN is tried again. */
const RETRY_MS = 500

class NotificationsLost extends Data.TaggedError("NotificationsLost")<{ readonly reason: string }> {}

/** Starts delivering the channel's payloads to `deliver`; answers an effect that fails when delivery stops. */
type Open = (deliver: (payload: string) => void) => Effect.Effect<Effect.Effect<never, unknown>, unknown, Scope.Scope>

export const AccessNotificationsLive = Layer.effectDiscard(Effect.gen(function*() {
  const caches = yield* AccessCaches
  const sql = yield* SqlClient.SqlClient
  const embedded = yield* Effect.serviceOption(DbEmbedded.Notifications)
  const pg = yield* Effect.serviceOption(PgClient.PgClient)
  const open: Open = Option.isSome(embedded)
    ? (deliver) =>
      Effect.gen(function*() {
        yield* Effect.acquireRelease(
          Effect.sync(() => embedded.value.subscribe(ACCESS_CHANNEL, deliver)),
          (unsubscribe) => Effect.sync(unsubscribe)
        )
        // The session's one connection: LISTEN is a setting of the session, not a held connection.
        yield* sql.unsafe(`LISTEN ${ACCESS_CHANNEL}`)
        return Effect.never
      })
    : (deliver) =>
      Effect.gen(function*() {
        if (Option.isNone(pg)) return yield* new NotificationsLost({ reason: "no PostgreSQL client" })
        const queue = yield* pg.value.listen(ACCESS_CHANNEL)
        return Queue.take(queue).pipe(Effect.map((notification) => deliver(notification.payload)), Effect.forever)
      })

  const ping = `ping:${randomUUID()}:`
  const session = Effect.gen(function*() {
    let sent = 0
    let received = 0
    const receiving = yield* open((payload) => {
      if (payload.startsWith(ping)) received = Math.max(received, Number(payload.slice(ping.length)))
      // Other nodes' pings concern nothing cached.
      else if (!payload.startsWith("ping:")) caches.changed(payload)
    })
    // Listening from here: what changed before is forgotten as the caches start again.
    caches.setLive(true)
    const watchdog = Effect.gen(function*() {
      for (;;) {
        yield* Effect.sleep(PING_EVERY_MS)
        if (received < sent) return yield* new NotificationsLost({ reason: `ping ${sent} did not come back within ${PING_EVERY_MS} ms` })
        sent++
        yield* sql`SELECT pg_notify(${ACCESS_CHANNEL}, ${ping + sent})`
      }
    })
    return yield* Effect.raceFirst(receiving, watchdog)
  }).pipe(Effect.scoped)

  // The caches are off (their start) until the first LISTEN is confirmed: a request before it reads the database.
  let failures = 0
  yield* session.pipe(
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.gen(function*() {
        // Said once per loss (and for a first LISTEN that fails), not at every retry.
        if (caches.live() || failures++ === 0) yield* Effect.logWarning("not receiving access changes: access caches off, every request reads the database until they are back", Cause.squash(cause))
        caches.setLive(false)
        yield* Effect.sleep(RETRY_MS)
      })
    ),
    Effect.forever,
    Effect.forkScoped
  )
}))
