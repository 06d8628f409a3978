/**
 * One cluster node of the Kafka contract suite, as its own process (so the
 * suite can SIGKILL it): KafkaBus, the shared PostgreSQL, and the entity
 * runtime hosting `TestEntity`. Prints `ready` once it has joined the group;
 * SIGTERM stops it gracefully.
 *
 *   GROVE_NODE_ID GROVE_KAFKA_BOOTSTRAP GROVE_KAFKA_PREFIX GROVE_SESSION_TIMEOUT_MS GROVE_DATABASE_URL
 */
import { DbPostgres } from "@grove/storage"
import { Cause, Effect, Exit, Fiber, Layer } from "effect"
import { EntityRuntime } from "../../src/EntityRuntime.ts"
import * as KafkaBus from "../../src/KafkaBus.ts"
import { TestHandlers } from "./TestEntity.ts"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") {
    process.stderr.write(`${name} is not set\n`)
    process.exit(2)
  }
  return value
}

const nodeId = env("GROVE_NODE_ID")

const Node = TestHandlers.pipe(
  Layer.provideMerge(EntityRuntime.layer()),
  Layer.provide(KafkaBus.layer({
    nodeId,
    bootstrap: env("GROVE_KAFKA_BOOTSTRAP"),
    prefix: env("GROVE_KAFKA_PREFIX"),
    sessionTimeout: Number(env("GROVE_SESSION_TIMEOUT_MS"))
  })),
  Layer.provide(DbPostgres.layer({ url: env("GROVE_DATABASE_URL"), applicationName: nodeId }))
)

const fiber = Effect.runFork(
  Effect.gen(function*() {
    yield* Layer.build(Node)
    process.stdout.write("ready\n")
    return yield* Effect.never
  }).pipe(Effect.scoped)
)

const stop = () => {
  Effect.runFork(Fiber.interrupt(fiber))
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)

fiber.addObserver((exit) => {
  if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) {
    process.stderr.write(`${Cause.pretty(exit.cause)}\n`)
    process.exit(1)
  }
  process.exit(0)
})
