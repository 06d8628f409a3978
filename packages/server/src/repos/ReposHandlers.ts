/**
 * Repository endpoints. Reads go to the database; writes are commands to the
 * Repository entity (`owner/name`) through the gateway.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Names } from "@grove/core"
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import type { RepositoryError } from "./RepositoryCommands.ts"
import type { GatewayFailure } from "../entities/Sending.ts"
import { RepositoryGateway } from "./RepositoryGateway.ts"
import { afterRepositoryWrite, Repositories } from "../access/Repositories.ts"
import { repositoryKey, toApiRepository } from "../access/RepositoryRecord.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable, gatewayApiError, isGatewayFailure, requireValid } from "../http/Failures.ts"
import { repositoryApiError } from "./RepositoryErrors.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"

const commandFailure = (error: RepositoryError | GatewayFailure) =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : repositoryApiError(error))

export const ReposHandlers = HttpApiBuilder.group(GroveApi, "repos", Effect.fn(function*(handlers) {
  const repositories = yield* Repositories
  const authorizer = yield* Authorizer
  const gateway = yield* RepositoryGateway
  // A write through this node is visible to this node's next read at once.
  const forget = (owner: string, name: string) => Effect.sync(() => repositories.invalidate(owner, name))
  return handlers.handleAll({
    list: Effect.fnUntraced(function*({ query }) {
      const caller = yield* CurrentCaller
      // Listing is a read: a key without the `read` scope may not (anonymous callers list public repositories).
      if (caller.principal.kind !== "anonymous") yield* authorizer.account(caller, "read")
      const sort = query.sort ?? "name"
      const page = yield* pageRequest(query, sort === "name" ? ["text", "text", "uuid"] : ["timestamp", "uuid"])
      const rows = yield* dbUnavailable(repositories.listReadable(caller.principal, caller.limits, sort, page))
      return { repos: (yield* pageResponse(rows, page)).map(toApiRepository) }
    }),
    create: Effect.fn(function*({ payload }) {
      const caller = yield* CurrentCaller
      let slug = payload.organization_slug
      if (slug === undefined) {
        if (caller.principal.kind !== "user") {
          return yield* (caller.principal.kind === "anonymous"
            ? new ApiErrors.Unauthorized({ error: "sign in required", code: "unauthenticated" })
            : new ApiErrors.BadRequest({ error: "organization_slug is required", code: "invalid_input" }))
        }
        slug = caller.principal.username
      }
      yield* requireValid(Names.checkSlug(slug, "organization slug"))
      const org = yield* dbUnavailable(authorizer.organization(caller, slug, "write"))
      const id = yield* commandRequest
      return yield* gateway.create(repositoryKey(org.slug, payload.name), {
        orgId: org.id,
        owner: org.slug,
        name: payload.name,
        description: payload.description ?? null,
        isPublic: payload.is_public ?? false,
        actor: yield* actorName
      }, id).pipe(Effect.ensuring(forget(org.slug, payload.name)), Effect.catch(commandFailure))
    }),
    get: Effect.fnUntraced(function*({ params }) {
      const caller = yield* CurrentCaller
      // Answered from the cached record: any change of the row (a merge's new head included) is notified at its
      // commit (AccessCaches): embedded, before the write answers; in cluster mode within milliseconds, well
      // ahead of the outbox's event that tells the Oak client's watch that main moved.
      return toApiRepository(yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read")))
    }),
    delete: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "admin"))
      yield* gateway.remove(repositoryKey(repo.owner, repo.name), { actor: yield* actorName }, yield* commandRequest).pipe(
        Effect.ensuring(forget(repo.owner, repo.name)),
        Effect.catch(commandFailure)
      )
    }),
    setVisibility: Effect.fn(function*({ params, payload }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "admin"))
      const request = { isPublic: payload.is_public, actor: yield* actorName }
      const id = yield* commandRequest
      const since = repositories.changesSeen()
      // The record as the change left it, without a read (none when nothing changed: forgotten, as before).
      return yield* gateway.setVisibility(repositoryKey(repo.owner, repo.name), request, id).pipe(
        Effect.onExit(afterRepositoryWrite(repositories, repo, { isPublic: payload.is_public }, since)),
        Effect.map((replied) => replied.value),
        Effect.catch(commandFailure)
      )
    }),
    transfer: Effect.fn(function*({ params, payload }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "admin"))
      // Moving a repository in needs the right to create repositories in the target organization.
      const target = yield* dbUnavailable(authorizer.organization(caller, payload.to_organization, "write"))
      return yield* gateway.transfer(
        repositoryKey(repo.owner, repo.name),
        { toOrgId: target.id, toOwner: target.slug, actor: yield* actorName },
        yield* commandRequest
      ).pipe(
        Effect.ensuring(Effect.andThen(forget(repo.owner, repo.name), forget(target.slug, repo.name))),
        Effect.catch(commandFailure)
      )
    }),
    size: Effect.fnUntraced(function*({ params }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read"))
      const usage = yield* dbUnavailable(repositories.usage(repo.id))
      return {
        full_name: `${repo.owner}/${repo.name}`,
        size_bytes: Option.match(usage, { onNone: () => 0, onSome: (u) => u.sizeBytes }),
        objects: Option.match(usage, { onNone: () => 0, onSome: (u) => u.objects })
      }
    })
  })
}))
