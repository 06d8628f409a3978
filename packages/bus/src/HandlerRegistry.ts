/**
 * The entity types this node has handlers for. Handlers register as the node starts: for a grace period after
 * the runtime starts, a command for a type not registered yet waits for them; after it, the type is unknown.
 * A type registered once and gone again is being stopped with the node (`CommandProcessor.Stopping`).
 */
import { Clock, Deferred, Duration, Effect, Option } from "effect"
import * as CommandProcessor from "./CommandProcessor.ts"
import type { Registered } from "./HandlerRun.ts"
import type { Entity, Handlers } from "./Entity.ts"

export const makeRegistry = Effect.fnUntraced(function*(grace: Duration.Input) {
  const registry = new Map<string, Registered>()
  /** Entity types registered at some point: one gone again is being stopped with the node, not unknown. */
  const known = new Set<string>()
  const waiting = new Map<string, Deferred.Deferred<void>>()
  const waiterOf = (entityType: string) => {
    let waiter = waiting.get(entityType)
    if (waiter === undefined) {
      waiter = Deferred.makeUnsafe<void>()
      waiting.set(entityType, waiter)
    }
    return waiter
  }

  const register = <E extends Entity>(entity: E, handlers: Handlers<E>): Effect.Effect<void> =>
    Effect.suspend(() => {
      registry.set(entity.name, { entity, handlers: handlers as unknown as Registered["handlers"] })
      known.add(entity.name)
      return Deferred.succeed(waiterOf(entity.name), undefined)
    })

  const unregister = (entity: Entity): Effect.Effect<void> =>
    Effect.sync(() => {
      registry.delete(entity.name)
      waiting.delete(entity.name)
    })

  const startedAt = yield* Clock.currentTimeMillis
  const lookup = (entityType: string) =>
    Effect.gen(function*() {
      const found = registry.get(entityType)
      if (found !== undefined) return Option.some(found)
      // Unregistered while the node stops: the worker ends (its drain waits for that), the next owner handles it.
      if (known.has(entityType)) return yield* new CommandProcessor.Stopping({ entityType })
      const left = startedAt + Duration.toMillis(Duration.fromInputUnsafe(grace)) - (yield* Clock.currentTimeMillis)
      if (left <= 0) return Option.none()
      return yield* Deferred.await(waiterOf(entityType)).pipe(
        Effect.timeoutOption(Duration.millis(left)),
        Effect.map(() => Option.fromNullishOr(registry.get(entityType)))
      )
    })

  return { register, unregister, lookup }
})
