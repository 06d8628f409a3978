/**
 * Path permissions (`/{owner}/{name}/path-permissions`): the server's parse of `.oak/PERMISSIONS` on
 * `main`, and proposals of a new file (or of its deletion) as a branch.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { BadRequest, Conflict, Forbidden, NotFound, OperationPending, PayloadTooLarge, ServiceUnavailable, Unauthorized } from "./Errors.ts"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"

export const PermissionsEntry = Schema.Struct({
  /** 1-based line of the file. */
  line: Schema.Number,
  pattern: Schema.String,
  /** Canonical: `@user`, `@org/group`, `*`. */
  principals: Schema.Array(Schema.String)
})

export const PermissionsWarning = Schema.Struct({
  /** 1-based; 0 for the whole file. */
  line: Schema.Number,
  code: Schema.String,
  message: Schema.String
})

export const PathPermissionsView = Schema.Struct({
  entries: Schema.Array(PermissionsEntry),
  principals: Schema.Array(Schema.String),
  warnings: Schema.Array(PermissionsWarning),
  /** A file is on main and the server enforces it (warnings or not: a line it could not read restricts nothing it did not name). */
  enforced: Schema.Boolean,
  /** The file reads exactly as written: no warning. */
  valid: Schema.Boolean,
  /** A whole-file limit was exceeded: every path is restricted to owners and admins. */
  lockdown: Schema.Boolean,
  /** Main's head commit the file was read at; null when main has no file. */
  commit: Schema.NullOr(Schema.String)
})
export type PathPermissionsView = typeof PathPermissionsView.Type

/** The new file's content (at most 64 KiB of UTF-8), or `delete: true`; an optional description for the branch. */
export const ProposePermissions = Schema.Union([
  Schema.Struct({
    content: Schema.String.check(Schema.isMaxLength(64 * 1024)),
    description: Schema.optionalKey(F.Multiline("description", 2000))
  }),
  Schema.Struct({
    delete: Schema.Literal(true),
    description: Schema.optionalKey(F.Multiline("description", 2000))
  })
])

export const Proposal = Schema.Struct({
  /** The new branch carrying the change, off main. */
  branch: Schema.String,
  /** Its head commit. */
  commit: Schema.String
})

const Owner = P.OwnerRepo

export class PathPermissionsGroup extends HttpApiGroup.make("pathPermissions").add(
  HttpApiEndpoint.get("show", "/:owner/:name/path-permissions", {
    params: Owner,
    success: PathPermissionsView,
    error: [Unauthorized, Forbidden, NotFound, ServiceUnavailable]
  }),
  /** Admins and owners of the repository's organization (a key needs the admin scope); others 403, no branch. */
  HttpApiEndpoint.post("propose", "/:owner/:name/path-permissions/propose", {
    params: Owner,
    payload: ProposePermissions,
    success: Proposal.pipe(HttpApiSchema.status(201)),
    error: [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, OperationPending, ServiceUnavailable]
  })
) {}
