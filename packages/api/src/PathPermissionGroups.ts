/**
 * Path permissions (`/{owner}/{name}/path-permissions`): the server's parse of `.oak/PERMISSIONS` on
 * `main`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Forbidden, NotFound, ServiceUnavailable, Unauthorized } from "./Errors.ts"
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

const Owner = P.OwnerRepo

export class PathPermissionsGroup extends HttpApiGroup.make("pathPermissions").add(
  HttpApiEndpoint.get("show", "/:owner/:name/path-permissions", {
    params: Owner,
    success: PathPermissionsView,
    error: [Unauthorized, Forbidden, NotFound, ServiceUnavailable]
  })
) {}
