/**
 * `GET /{owner}/{name}/path-permissions`: the server's parse of `.oak/PERMISSIONS` on main, with a
 * warning for every principal that names no user or group of the repository's organization.
 * `POST …/path-permissions/propose`: a new branch off main carrying the proposed file (or its
 * deletion), pushed through the same verification and Branch entity command as any push; only
 * those who may change the repository's settings (admins and owners, keys with `admin`) may.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Permissions } from "@grove/core"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { Authorizer } from "../access/Authorizer.ts"
import { branchKey } from "../content/BranchCommands.ts"
import { BranchGateway } from "../content/BranchGateway.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { dedupScope } from "./DedupScope.ts"
import { preparePush } from "../content/PushPreparation.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { branchCommandFailure, contentFailure } from "../content/ContentFailures.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import { planProposal } from "./ProposalPlanner.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { PathPermissions } from "./PathPermissions.ts"

export const PathPermissionsHandlers = HttpApiBuilder.group(GroveApi, "pathPermissions", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const permissions = yield* PathPermissions
  const sql = yield* SqlClient.SqlClient
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore
  const branchGateway = yield* BranchGateway
  const content = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(ContentObjects, objects), Effect.provideService(ChunkStore, chunks))
  /** The principals of `names` (`@user`, `@org/group`) that exist. */
  const known = (orgId: string, orgSlug: string, names: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const users = names.filter((n) => n.startsWith("@") && !n.includes("/")).map((n) => n.slice(1))
      const groups = names.filter((n) => n.startsWith(`@${orgSlug}/`)).map((n) => n.slice(orgSlug.length + 2))
      const found = new Set<string>()
      if (users.length > 0) {
        for (const row of yield* sql<{ username: string }>`SELECT username FROM users WHERE username IN ${sql.in(users)}`) {
          found.add(`@${row.username}`)
        }
      }
      if (groups.length > 0) {
        for (const row of yield* sql<{ slug: string }>`SELECT slug FROM org_groups WHERE org_id = ${orgId} AND slug IN ${sql.in(groups)}`) {
          found.add(`@${orgSlug}/${row.slug}`)
        }
      }
      return found
    })
  return handlers.handleAll({
    show: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read"))
      const unavailable = () =>
        new ApiErrors.ServiceUnavailable({ error: "path permissions could not be read; try again", code: "unavailable", retryable: true })
      const loaded = yield* permissions.load(repo).pipe(Effect.mapError(unavailable))
      if (loaded === undefined) {
        return { entries: [], principals: [], warnings: [], enforced: false, valid: true, lockdown: false, commit: null }
      }
      const exists = yield* known(repo.orgId, repo.owner, loaded.file.principals).pipe(Effect.mapError(unavailable))
      const file = Permissions.withUnknownPrincipals(loaded.file, (principal) => exists.has(principal))
      return {
        entries: file.entries.map((e) => ({ line: e.line, pattern: e.pattern, principals: [...e.principals] })),
        principals: [...file.principals],
        warnings: file.warnings.map((w) => ({ line: w.line, code: w.code, message: w.message })),
        enforced: true,
        valid: file.valid,
        lockdown: file.lockdown,
        commit: loaded.head
      }
    }),
    propose: Effect.fn(function*({ params, payload }) {
      const caller = yield* CurrentCaller
      // Changing who may read what is a repository setting: admins and owners only; others learn nothing more (403).
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "admin"))
      // The proposal is main's tree with one file changed: a key must also be able to read that tree.
      yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read"))
      const deleting = "delete" in payload
      const branch = `permissions-${new Date().toISOString().slice(0, 10)}-${randomBytes(4).toString("hex")}`
      const actor = yield* actorName
      const plan = yield* planProposal(repo, {
        branch,
        content: deleting ? null : payload.content,
        description: payload.description ?? (deleting ? "Remove .oak/PERMISSIONS" : "Change .oak/PERMISSIONS"),
        author: actor
      }).pipe(
        content,
        Effect.catchTag("NothingToDelete", () =>
          Effect.fail(new ApiErrors.Conflict({ error: "main has no .oak/PERMISSIONS to delete", code: "no_permissions_file" }))),
        dbUnavailable
      )
      const scope = yield* dbUnavailable(content(dedupScope(caller, repo)))
      const prepared = yield* contentFailure(content(preparePush(repo, plan.request, scope)))
      const stagedId = yield* dbUnavailable(objects.stagePush(repo.id, { trees: prepared.newTrees, blobs: prepared.newBlobs }))
      yield* branchGateway.push(branchKey(repositoryKey(repo.owner, repo.name), prepared.branchName), {
        stagedId,
        commits: prepared.commits,
        tip: prepared.tip,
        force: false,
        branch: plan.request.branch ?? null,
        actor
      }, yield* commandRequest).pipe(Effect.catch(branchCommandFailure))
      return { branch, commit: plan.commit }
    })
  })
}))
