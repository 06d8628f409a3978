/**
 * Users, their personal organizations, login sessions, token authentication (sessions, personal
 * and service-account keys) and the one-time codes of the headless sign-in. Every write is one
 * transaction; personal keys are created and revoked by Organization entity commands
 * (`ApiKeyCommands.ts`).
 */
import type { Caller } from "@grove/api"
import { Access, Names } from "@grove/core"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { CodeNotValid, InvalidInput, InvalidToken, NameTaken, TokenExpired, UserNotFound } from "./IdentityErrors.ts"
import * as Secrets from "./Secrets.ts"
import { ACCESS_CACHE_TTL_MS, AccessCaches } from "../cache/AccessCaches.ts"
import { TtlCache } from "../cache/TtlCache.ts"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"

export const SESSION_LIFETIME_MS = 90 * 24 * 60 * 60 * 1000
const CODE_LIFETIME_MS = 10 * 60 * 1000
/**
 * last_used_at is refreshed at most this often per token, so a request does not cost a database
 * write: only when the stored (or this node's last written) value is older than this, in the
 * background, and a failed write never fails the request.
 */
export const LAST_USED_GRANULARITY_MS = 60 * 1000
/** Verified against when a user is unknown or has no password: costs the same, never matches. */
const UNUSABLE_PASSWORD_HASH = `scrypt$16384$8$1$${"00".repeat(16)}$${"00".repeat(32)}`

export interface User {
  readonly id: string
  readonly username: string
  readonly isAdmin: boolean
  readonly createdAt: Date
}

export interface ApiKeyRecord {
  readonly id: string
  readonly name: string
  readonly scope: "full" | "read"
  readonly repo: string | undefined
  readonly prefix: string
  readonly createdAt: Date
  readonly lastUsedAt: Date | undefined
  /** Beyond the spec: when the key stops working; undefined: never. */
  readonly expiresAt: Date | undefined
}

export interface IssuedToken {
  readonly id: string
  readonly token: string
  readonly expiresAt: Date | undefined
}

/** A service account's key, with its account and organization. */
interface ServiceKeyRow {
  readonly id: string
  readonly kind: "service"
  readonly secretHash: string
  readonly scopes: string
  readonly creatorId: string | null
  readonly revokedAt: Date | null
  readonly lastUsedAt: Date | null
  readonly accountId: string
  readonly accountName: string
  readonly disabled: boolean
  readonly orgId: string
  readonly orgSlug: string
}

interface TokenRow {
  readonly id: string
  readonly kind: "session" | "personal"
  readonly secretHash: string
  readonly scope: "full" | "read"
  readonly repoId: string | null
  readonly expiresAt: Date | null
  readonly revokedAt: Date | null
  readonly lastUsedAt: Date | null
  readonly userId: string
  readonly username: string
  readonly isAdmin: boolean
}

const isUniqueViolation = (error: SqlError) => error.reason._tag === "UniqueViolation"

export class Identity extends Context.Service<Identity, {
  readonly createUser: (input: {
    readonly username: string
    readonly admin: boolean
    readonly password?: string | undefined
  }) => Effect.Effect<{ readonly user: User; readonly apiKey: string }, NameTaken | InvalidInput | SqlError>
  readonly setPassword: (username: string, password: string) => Effect.Effect<void, UserNotFound | InvalidInput | SqlError>
  readonly checkPassword: (username: string, password: string) => Effect.Effect<Option.Option<User>, SqlError>
  readonly authenticate: (token: string) => Effect.Effect<Caller, InvalidToken | TokenExpired | SqlError>
  /** `authenticate`'s caller when its token is cached, valid and has no last use to record; else undefined. Synchronous. */
  readonly cachedCaller: (token: string) => Caller | undefined
  readonly createSession: (userId: string) => Effect.Effect<IssuedToken, SqlError>
  /** Ends a session (a browser's sign-out): it stops working at once (the revocation is notified to every node, AccessCaches). */
  readonly endSession: (token: string) => Effect.Effect<void, SqlError>
  /** One of the user's live personal keys. */
  readonly apiKey: (userId: string, keyId: string) => Effect.Effect<ApiKeyRecord | undefined, SqlError>
  /** One page of the user's live personal keys, oldest first: at most `page.limit + 1` rows after `page.after`. */
  readonly listApiKeys: (userId: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<ApiKeyRecord>>, SqlError>
  readonly issueCliCode: (userId: string) => Effect.Effect<string, SqlError>
  readonly exchangeCliCode: (code: string) => Effect.Effect<IssuedToken & { readonly username: string }, CodeNotValid | SqlError>
}>()("grove/server/identity/Identity") {
  static readonly layer = Layer.effect(Identity, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const tokens = new TtlCache<string, TokenRow | ServiceKeyRow | undefined>(ACCESS_CACHE_TTL_MS)
    const accessCaches = yield* AccessCaches
    accessCaches.register(tokens)
    const touched = new Map<string, number>()
    // Tokens are not remembered by their plain text (only their hashes are kept anywhere): hashing one costs ~0.5 µs.
    const hashOf = (token: string): string | undefined => Secrets.looksLikeToken(token) ? Secrets.hashToken(token) : undefined

    const checkPasswordInput = (password: string) =>
      password.length < 8 || password.length > 1024
        ? Effect.fail(new InvalidInput({ message: "password must be 8 to 1024 characters" }))
        : Effect.void

    const issue = Effect.fn("Identity.issue")(function*(input: {
      readonly kind: "session" | "personal"
      readonly userId: string
      readonly name?: string | undefined
      readonly scope?: "full" | "read" | undefined
      readonly repoId?: string | undefined
      readonly expiresAt?: Date | undefined
    }) {
      const token = Secrets.newToken()
      const id = randomUUID()
      const rows = yield* sql<{ createdAt: Date }>`INSERT INTO tokens ${
        sql.insert({
          id,
          kind: input.kind,
          secret_hash: Secrets.hashToken(token),
          prefix: Secrets.tokenPrefix(token),
          user_id: input.userId,
          name: input.name ?? null,
          scope: input.scope ?? "full",
          repo_id: input.repoId ?? null,
          expires_at: input.expiresAt ?? null
        })
      } RETURNING created_at AS "createdAt"`
      return { id, token, createdAt: rows[0]!.createdAt }
    })

    const keyColumns: ReadonlyArray<KeyColumn> = [
      { expr: sql`t.created_at`, cast: "timestamptz", read: sql`t.created_at::text` },
      { expr: sql`t.id`, cast: "uuid" }
    ]
    /** The user's live personal keys, oldest first: one (`keyId`), or one page. */
    const keyRecords = (userId: string, only: { readonly keyId: string } | { readonly page: PageRequest }) =>
      sql<{
        id: string
        name: string
        scope: "full" | "read"
        repo: string | null
        prefix: string
        createdAt: Date
        lastUsedAt: Date | null
        expiresAt: Date | null
      }>`SELECT t.id, t.name, t.scope, t.prefix, t.created_at AS "createdAt", t.last_used_at AS "lastUsedAt",
          t.expires_at AS "expiresAt",
          CASE WHEN r.id IS NULL THEN NULL ELSE o.slug || '/' || r.name END AS repo ${Keyset.selectKeys(sql, keyColumns)}
        FROM tokens t
        LEFT JOIN repositories r ON r.id = t.repo_id
        LEFT JOIN organizations o ON o.id = r.org_id
        WHERE t.user_id = ${userId} AND t.kind = 'personal' AND t.revoked_at IS NULL
          AND ${"keyId" in only ? sql`t.id = ${only.keyId}` : Keyset.after(sql, keyColumns, only.page.after)}
        ${Keyset.orderBy(sql, keyColumns)} ${"page" in only ? Keyset.limitPlusOne(sql, only.page) : sql``}`.pipe(
        Effect.map((rows) =>
          Keyset.keyed(rows, keyColumns).map(({ key, row: r }) => ({ key, row: {
            id: r.id,
            name: r.name,
            scope: r.scope,
            repo: r.repo ?? undefined,
            prefix: r.prefix,
            createdAt: r.createdAt,
            lastUsedAt: r.lastUsedAt ?? undefined,
            expiresAt: r.expiresAt ?? undefined
          } satisfies ApiKeyRecord }))
        )
      )

    const createUser = Effect.fn("Identity.createUser")(function*(input: {
      readonly username: string
      readonly admin: boolean
      readonly password?: string | undefined
    }) {
      const check = Names.checkSlug(input.username, "user name")
      if (!check.ok) return yield* new InvalidInput({ message: check.reason })
      if (input.password !== undefined) yield* checkPasswordInput(input.password)
      const passwordHash = input.password === undefined
        ? null
        : yield* Effect.promise(() => Secrets.hashPassword(input.password!))
      const userId = randomUUID()
      const orgId = randomUUID()
      return yield* sql.withTransaction(Effect.gen(function*() {
        const users = yield* sql<{ createdAt: Date }>`INSERT INTO users ${
          sql.insert({ id: userId, username: input.username, is_admin: input.admin, password_hash: passwordHash })
        } RETURNING created_at AS "createdAt"`
        yield* sql`INSERT INTO organizations ${
          sql.insert({ id: orgId, slug: input.username, name: input.username, personal_user_id: userId })
        }`
        yield* sql`INSERT INTO memberships ${sql.insert({ org_id: orgId, user_id: userId, role: "owner" })}`
        const key = yield* issue({ kind: "personal", userId, name: "initial key" })
        yield* sql`INSERT INTO audit_log ${
          sql.insert({ org_id: orgId, actor: "admin", action: "user.create", target: input.username })
        }`
        const user: User = { id: userId, username: input.username, isAdmin: input.admin, createdAt: users[0]!.createdAt }
        return { user, apiKey: key.token }
      })).pipe(
        Effect.catchTag("SqlError", (error): Effect.Effect<never, NameTaken | SqlError> =>
          isUniqueViolation(error) ? Effect.fail(new NameTaken({ name: input.username })) : Effect.fail(error))
      )
    })

    const userRow = (username: string) =>
      sql<{ id: string; username: string; isAdmin: boolean; createdAt: Date; passwordHash: string | null }>`
        SELECT id, username, is_admin AS "isAdmin", created_at AS "createdAt", password_hash AS "passwordHash"
        FROM users WHERE username = ${username}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])))

    const toUser = (row: { id: string; username: string; isAdmin: boolean; createdAt: Date }): User => ({
      id: row.id,
      username: row.username,
      isAdmin: row.isAdmin,
      createdAt: row.createdAt
    })

    const serviceKey = (hash: string) =>
      sql<ServiceKeyRow>`SELECT k.id, 'service' AS kind, k.secret_hash AS "secretHash", k.scopes, k.created_by AS "creatorId",
          k.revoked_at AS "revokedAt", k.last_used_at AS "lastUsedAt", a.id AS "accountId", a.name AS "accountName", a.disabled,
          o.id AS "orgId", o.slug AS "orgSlug"
        FROM service_account_keys k JOIN service_accounts a ON a.id = k.account_id JOIN organizations o ON o.id = a.org_id
        WHERE k.secret_hash = ${hash}`.pipe(Effect.map((rows) => rows[0]))

    /**
     * The caller a row makes, once per row object: cached rows are never changed in place (a change
     * reloads the row), and the hot reads would otherwise build three objects per request.
     */
    const callers = new WeakMap<TokenRow | ServiceKeyRow, Caller>()
    /** What a token row lets its holder be, now: the caller, or why not. Shared by `authenticate` and `cachedCaller`. */
    const callerFromRow = (row: TokenRow | ServiceKeyRow | undefined, hash: string, now: number): Caller | InvalidToken | TokenExpired => {
      if (row === undefined || !Secrets.constantTimeEqualHex(row.secretHash, hash)) return new InvalidToken()
      if (row.revokedAt !== null) return new InvalidToken()
      // A disabled account's keys all stop; enabling it restores them.
      if (row.kind === "service" && row.disabled) return new InvalidToken()
      // Only the holder of the secret learns that it expired (the hash matched above).
      if (row.kind !== "service" && row.expiresAt !== null && row.expiresAt.getTime() <= now) return new TokenExpired()
      let caller = callers.get(row)
      if (caller === undefined) callers.set(row, caller = callerOfRow(row))
      return caller
    }
    const callerOfRow = (row: TokenRow | ServiceKeyRow): Caller => {
      if (row.kind === "service") {
        return {
          principal: { kind: "service_account", accountId: row.accountId, orgId: row.orgId, orgSlug: row.orgSlug, name: row.accountName },
          limits: { kind: "service", scopes: Access.parseScopes(row.scopes) ?? [], creatorId: row.creatorId ?? undefined },
          tokenId: row.id
        }
      }
      return {
        principal: { kind: "user", userId: row.userId, username: row.username, siteAdmin: row.isAdmin },
        limits: row.kind === "session"
          ? { kind: "session" }
          : { kind: "personal", scope: row.scope, repoId: row.repoId ?? undefined },
        tokenId: row.id,
        expiresAt: row.expiresAt ?? undefined
      }
    }
    /** Whether the token's last use is older than LAST_USED_GRANULARITY_MS (then it is recorded). */
    const lastUseDue = (row: TokenRow | ServiceKeyRow, now: number) =>
      now - Math.max(touched.get(row.id) ?? 0, row.lastUsedAt?.getTime() ?? 0) >= LAST_USED_GRANULARITY_MS

    // Runs on every request: untraced, because a traced function captures a stack trace per call.
    const authenticate = Effect.fnUntraced(function*(token: string) {
      const hash = hashOf(token)
      if (hash === undefined) return yield* new InvalidToken()
      const row = yield* tokens.get(
        hash,
        Effect.suspend(() => sql<TokenRow>`
          SELECT t.id, t.kind, t.secret_hash AS "secretHash", t.scope, t.repo_id AS "repoId", t.expires_at AS "expiresAt",
            t.revoked_at AS "revokedAt", t.last_used_at AS "lastUsedAt", u.id AS "userId", u.username, u.is_admin AS "isAdmin"
          FROM tokens t JOIN users u ON u.id = t.user_id
          WHERE t.secret_hash = ${hash}`).pipe(
          Effect.flatMap((rows): Effect.Effect<TokenRow | ServiceKeyRow | undefined, SqlError> =>
            rows[0] !== undefined ? Effect.succeed(rows[0]) : serviceKey(hash)
          )
        )
      )
      const now = Date.now()
      const caller = callerFromRow(row, hash, now)
      if (caller instanceof InvalidToken || caller instanceof TokenExpired) return yield* caller
      // Recording the last use must not add a database write to every request: at most once per
      // LAST_USED_GRANULARITY_MS per token (this node remembers its own writes, the cached row may be
      // older, and the UPDATE's condition keeps other nodes from writing within the minute too), in a
      // detached fiber, so the request neither waits for it nor fails with it.
      if (lastUseDue(row!, now)) {
        touched.set(row!.id, now)
        if (touched.size > 100_000) touched.clear()
        const table = row!.kind === "service" ? sql`service_account_keys` : sql`tokens`
        yield* Effect.forkDetach(
          sql`UPDATE ${table} SET last_used_at = now() WHERE id = ${row!.id}
            AND (last_used_at IS NULL OR last_used_at <= now() - ${`${LAST_USED_GRANULARITY_MS} milliseconds`}::interval)`.pipe(
            Effect.ignoreCause({ log: true, message: "could not record a token's last use" })
          )
        )
      }
      return caller
    })

    // The same answer as `authenticate` when everything it needs is cached and it has nothing to
    // write; undefined otherwise (the caller then authenticates through `authenticate`).
    const cachedCaller = (token: string): Caller | undefined => {
      const hash = hashOf(token)
      if (hash === undefined) return undefined
      const hit = tokens.peek(hash)
      if (hit === undefined || hit.value === undefined) return undefined
      const now = Date.now()
      const caller = callerFromRow(hit.value, hash, now)
      if (caller instanceof InvalidToken || caller instanceof TokenExpired || lastUseDue(hit.value, now)) return undefined
      return caller
    }

    return Identity.of({
      cachedCaller,
      createUser,
      setPassword: Effect.fn("Identity.setPassword")(function*(username: string, password: string) {
        yield* checkPasswordInput(password)
        const hash = yield* Effect.promise(() => Secrets.hashPassword(password))
        const rows = yield* sql`UPDATE users SET password_hash = ${hash}, version = version + 1
          WHERE username = ${username} RETURNING id`
        if (rows.length === 0) return yield* new UserNotFound({ username })
      }),
      checkPassword: Effect.fn("Identity.checkPassword")(function*(username: string, password: string) {
        const row = yield* userRow(username)
        // Hash even for unknown users so the answer takes the same time either way.
        const stored = Option.getOrUndefined(row)?.passwordHash ?? UNUSABLE_PASSWORD_HASH
        const valid = yield* Effect.promise(() => Secrets.verifyPassword(password, stored))
        return Option.isSome(row) && row.value.passwordHash !== null && valid ? Option.some(toUser(row.value)) : Option.none()
      }),
      authenticate,
      createSession: Effect.fn("Identity.createSession")(function*(userId: string) {
        const expiresAt = new Date(Date.now() + SESSION_LIFETIME_MS)
        const issued = yield* issue({ kind: "session", userId, expiresAt })
        return { id: issued.id, token: issued.token, expiresAt }
      }),
      endSession: Effect.fn("Identity.endSession")(function*(token: string) {
        const hash = Secrets.hashToken(token)
        yield* sql`UPDATE tokens SET revoked_at = now() WHERE secret_hash = ${hash} AND kind = 'session' AND revoked_at IS NULL`
        tokens.invalidate(hash)
      }),
      apiKey: (userId, keyId) => Effect.map(keyRecords(userId, { keyId }), (rows) => rows[0]?.row),
      listApiKeys: (userId, page) => keyRecords(userId, { page }),
      issueCliCode: Effect.fn("Identity.issueCliCode")(function*(userId: string) {
        const code = Secrets.newOneTimeCode()
        yield* sql`INSERT INTO cli_auth_codes ${
          sql.insert({
            code_hash: Secrets.hashToken(Secrets.normalizeOneTimeCode(code)),
            user_id: userId,
            expires_at: new Date(Date.now() + CODE_LIFETIME_MS)
          })
        }`
        return code
      }),
      exchangeCliCode: Effect.fn("Identity.exchangeCliCode")(function*(code: string) {
        const normalized = Secrets.normalizeOneTimeCode(code)
        if (normalized.length !== 10) return yield* new CodeNotValid()
        return yield* sql.withTransaction(Effect.gen(function*() {
          // Single use: the compare-and-set on used_at lets exactly one exchange win.
          const rows = yield* sql<{ userId: string; username: string }>`
            UPDATE cli_auth_codes c SET used_at = now() FROM users u
            WHERE c.code_hash = ${Secrets.hashToken(normalized)} AND c.used_at IS NULL AND c.expires_at > now()
              AND u.id = c.user_id
            RETURNING c.user_id AS "userId", u.username`
          const row = rows[0]
          if (row === undefined) return yield* new CodeNotValid()
          const expiresAt = new Date(Date.now() + SESSION_LIFETIME_MS)
          const issued = yield* issue({ kind: "session", userId: row.userId, expiresAt })
          return { id: issued.id, token: issued.token, expiresAt, username: row.username }
        }))
      })
    })
  }))
}
