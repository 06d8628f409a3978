/**
 * What content commands share: who the user is, the checkout's repository on
 * its server, and the personal branch name `<user>-<6 hex>`.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import type { Connection } from "../Client.ts"
import { connect } from "../Client.ts"
import { failure } from "../Failures.ts"
import type { Workspace } from "../local/Workspace.ts"
import { repositoryOf } from "../local/Workspace.ts"
import { repoRemote } from "./RemoteRepo.ts"

/** The caller's name as the server knows it. */
export const whoami = (connection: Connection) => Effect.map(connection.call(connection.client.system.whoami()), (w) => w.name)

/** `<user>-<6 hex>`, the user part reduced to characters every server accepts in a branch name. */
export const personalBranchName = (user: string): string => {
  const slug = user.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "") || "user"
  return `${slug}-${randomBytes(3).toString("hex")}`
}

/** The checkout's repository on the server the checkout is bound to. */
export const remoteOf = Effect.fn("Session.remoteOf")(function*(workspace: Workspace) {
  const repository = repositoryOf(workspace)
  if (repository === undefined) {
    return yield* failure("this checkout has no repository yet: run grove push to create it", "no_repository")
  }
  const connection = yield* connect(workspace.config.remote)
  return repoRemote(connection, repository.owner, repository.name)
})
