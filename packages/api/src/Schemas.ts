/**
 * Request and response bodies of the JSON API (snake_case on the wire, as in the spec).
 * Length and character rules are enforced by the server with `@grove/core` Names,
 * so the error message can say exactly what is wrong.
 */
import { Schema } from "effect"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"

export const Version = Schema.Struct({
  version: Schema.String,
  mode: Schema.Literals(["embedded", "cluster"]),
  node_id: Schema.String
})

/**
 * A node that can serve: its database and message bus answer, and every command partition the
 * group gives it has a live worker that claimed it (none stuck). Otherwise 503 `not_ready`.
 */
export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  mode: Schema.Literals(["embedded", "cluster"]),
  node_id: Schema.String,
  /** Partitions retrying right now (not yet long enough to make the node unready). */
  stalled_partitions: Schema.Array(Schema.Number),
  /** "host": serves the command partitions below; "client": a client-only node, it hosts none and only sends writes. */
  role: Schema.optionalKey(Schema.Literals(["host", "client"])),
  /** The command partitions this node serves (each claimed by a live worker). */
  partitions: Schema.optionalKey(Schema.Array(Schema.Number))
})

export const TokenKind = Schema.Literals(["session", "personal", "service"])

export const Whoami = Schema.Struct({
  kind: Schema.Literals(["user", "service_account"]),
  /** The user name, or the service account's name. */
  name: Schema.String,
  /** The same name under the field the sync protocol's clients read (`{username, display_name?}`). */
  username: Schema.String,
  is_admin: Schema.Boolean,
  organization: Schema.optionalKey(Schema.String),
  token: Schema.Struct({
    kind: TokenKind,
    scopes: Schema.Array(Schema.String),
    repo: Schema.optionalKey(Schema.String),
    expires_at: Schema.optionalKey(Schema.String)
  })
})
export type Whoami = typeof Whoami.Type

export const ApiKey = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  scope: Schema.Literals(["full", "read"]),
  repo: Schema.optionalKey(Schema.String),
  prefix: Schema.String,
  created_at: Schema.String,
  /** When the key was last used, to the minute (it is recorded at most once a minute). */
  last_used_at: Schema.optionalKey(Schema.String),
  /** When the key stops working; absent: never. */
  expires_at: Schema.optionalKey(Schema.String)
})
export type ApiKey = typeof ApiKey.Type

export const CreatedApiKey = Schema.Struct({ ...ApiKey.fields, key: Schema.String })

export const CreateApiKey = Schema.Struct({
  name: F.Text("name", 100),
  scope: Schema.optionalKey(Schema.Literals(["full", "read"])),
  repo: Schema.optionalKey(F.FullName),
  /** Beyond the spec: when the key stops working (in the future, else 400); absent: never. */
  expires_at: Schema.optionalKey(F.Timestamp("expires_at"))
})

export const Role = Schema.Literals(["member", "admin", "owner"])

export const Organization = Schema.Struct({
  slug: Schema.String,
  name: Schema.String,
  description: Schema.optionalKey(Schema.String),
  personal: Schema.Boolean,
  role: Schema.optionalKey(Role),
  created_at: Schema.String
})
export type Organization = typeof Organization.Type

export const CreateOrganization = Schema.Struct({
  slug: F.NewSlug,
  name: F.Text("organization name", 100),
  description: Schema.optionalKey(F.Multiline("description", 2000))
})

export const Repository = Schema.Struct({
  id: Schema.String,
  owner: Schema.String,
  name: Schema.String,
  full_name: Schema.String,
  description: Schema.optionalKey(Schema.String),
  is_public: Schema.Boolean,
  visibility: Schema.Literals(["public", "private"]),
  /** The head commit of `main`, or null while the repository is empty. */
  head: Schema.NullOr(Schema.String),
  default_branch: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String
})
export type Repository = typeof Repository.Type

export const CreateRepository = Schema.Struct({
  name: P.RepoName,
  /** The Oak client sends null for "none". */
  description: Schema.optionalKey(Schema.NullOr(F.Multiline("description", 2000))),
  is_public: Schema.optionalKey(Schema.Boolean),
  organization_slug: Schema.optionalKey(F.NewSlug)
})

export const SetVisibility = Schema.Struct({ is_public: Schema.Boolean })

export const Transfer = Schema.Struct({ to_organization: F.NewSlug })

export const RepositorySize = Schema.Struct({
  full_name: Schema.String,
  /** Bytes of stored objects referenced by the repository (deduplicated within its organization). */
  size_bytes: Schema.Number,
  objects: Schema.Number
})

export const RepoSort = Schema.Literals(["name", "updated", "created"])

export const Operation = Schema.Struct({
  id: Schema.String,
  status: Schema.Literals(["pending", "done"]),
  /** The HTTP status the write answered with, once done. */
  http_status: Schema.optionalKey(Schema.Number),
  /** The write's response body, once done. */
  response: Schema.optionalKey(Schema.Unknown)
})

export const CliCodeExchange = Schema.Struct({ code: Schema.String })

export const CliToken = Schema.Struct({
  token: Schema.String,
  username: Schema.String,
  expires_at: Schema.String
})
