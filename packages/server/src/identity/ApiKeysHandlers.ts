/**
 * Personal API keys (`/api-keys`). Creation and revocation are commands to the Organization entity
 * of the caller's personal organization (audit row, outbox event); the secret is made here, shown
 * once, and only its hash travels.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Names } from "@grove/core"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { randomUUID } from "node:crypto"
import { Authorizer } from "../access/Authorizer.ts"
import { AccessCaches } from "../cache/AccessCaches.ts"
import type { GatewayFailure } from "../entities/Sending.ts"
import { actorOf, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable, gatewayApiError, isGatewayFailure } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"
import { type ServiceAccountError, serviceAccountApiError } from "../service-accounts/ServiceAccountErrors.ts"
import { ApiKeyGateway } from "./ApiKeyGateway.ts"
import { type ApiKeyRecord, Identity } from "../access/Identity.ts"
import * as Secrets from "../access/Secrets.ts"

const toApi = (k: ApiKeyRecord) => ({
  id: k.id,
  name: k.name,
  scope: k.scope,
  ...(k.repo === undefined ? {} : { repo: k.repo }),
  prefix: k.prefix,
  created_at: k.createdAt.toISOString(),
  ...(k.lastUsedAt === undefined ? {} : { last_used_at: k.lastUsedAt.toISOString() }),
  ...(k.expiresAt === undefined ? {} : { expires_at: k.expiresAt.toISOString() })
})

const currentUser = Effect.gen(function*() {
  const caller = yield* CurrentCaller
  if (caller.principal.kind !== "user") {
    return yield* new ApiErrors.Forbidden({ error: "only users have personal API keys", code: "forbidden" })
  }
  return { caller, userId: caller.principal.userId, username: caller.principal.username }
})

const commandFailure = (error: ServiceAccountError | GatewayFailure) =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : serviceAccountApiError(error))

export const ApiKeysHandlers = HttpApiBuilder.group(GroveApi, "apiKeys", Effect.fn(function*(handlers) {
  const identity = yield* Identity
  const authorizer = yield* Authorizer
  const gateway = yield* ApiKeyGateway
  const caches = yield* AccessCaches
  return handlers.handleAll({
    list: Effect.fn(function*({ query }) {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "read")
      const { userId } = yield* currentUser
      const page = yield* pageRequest(query, ["timestamp", "uuid"])
      const rows = yield* dbUnavailable(identity.listApiKeys(userId, page))
      return { api_keys: (yield* pageResponse(rows, page)).map(toApi) }
    }),
    create: Effect.fn(function*({ payload }) {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "write")
      const { userId, username } = yield* currentUser
      let repoId: string | undefined
      if (payload.repo !== undefined) {
        const full = Names.parseFullName(payload.repo)
        if (full === undefined) {
          return yield* new ApiErrors.BadRequest({ error: "repo must have the form owner/name", code: "invalid_input" })
        }
        // The key's owner must be able to read the repository it is limited to; otherwise it does not exist for them.
        const repo = yield* dbUnavailable(authorizer.repository(caller, full.owner, full.name, "read"))
        repoId = repo.id
      }
      // Beyond the spec: the schema checked the timestamp's form; it must also lie in the future.
      const expiresAt = payload.expires_at === undefined ? undefined : new Date(payload.expires_at)
      if (expiresAt !== undefined && expiresAt.getTime() <= Date.now()) {
        return yield* new ApiErrors.BadRequest({ error: "expires_at must be in the future", code: "invalid_input" })
      }
      const token = Secrets.newToken()
      const created = yield* gateway.createPersonalKey(username, {
        userId,
        keyId: randomUUID(),
        name: payload.name,
        scope: payload.scope ?? "full",
        repoId: repoId ?? null,
        expiresAt: expiresAt?.toISOString() ?? null,
        secretHash: Secrets.hashToken(token),
        prefix: Secrets.tokenPrefix(token),
        ...(yield* actorOf(caller))
      }, yield* commandRequest).pipe(Effect.catch(commandFailure))
      const record = yield* dbUnavailable(identity.apiKey(userId, created.id))
      if (record === undefined) return yield* new ApiErrors.NotFound({ error: "API key not found", code: "not_found" })
      // A replayed request (same Idempotency-Key) finds the key made the first time, whose secret was shown then.
      const replayed = record.prefix !== Secrets.tokenPrefix(token)
      if (replayed) {
        return yield* new ApiErrors.Conflict({
          error: "this key was created by the first request with this Idempotency-Key; its secret was shown once",
          code: "already_created"
        })
      }
      return { ...toApi(record), key: token }
    }),
    revoke: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "write")
      const { userId, username } = yield* currentUser
      yield* gateway.revokePersonalKey(username, { userId, keyId: params.id, ...(yield* actorOf(caller)) }, yield* commandRequest).pipe(
        // Revocation must bite at once on this node (other nodes: the events topic).
        Effect.ensuring(Effect.sync(() => caches.invalidateAll())),
        Effect.catch(commandFailure)
      )
    })
  })
}))
