/**
 * What this node caches about who may do what (tokens, roles, organizations, repositories), and
 * when it forgets it. The database notifies `ACCESS_CHANNEL` in every transaction that changes such
 * a row (triggers, migration 0016), and `AccessNotifications` hands each notification to `changed`:
 * - embedded: in this process, as the transaction commits and before its COMMIT answers, so the
 *   next request anywhere sees the change;
 * - cluster: through each node's LISTEN connection, a few milliseconds after the commit. While a
 *   node is not listening (starting, or its connection lost) its caches are off and every read goes
 *   to the database; they come back empty once it listens again.
 * Writes through this node also forget at once what they change (the handlers' own invalidations).
 */
import { Context, Layer } from "effect"

/**
 * How long an access cache keeps an entry. Changes are forgotten when notified, not by age: this
 * bounds memory and, should a change ever escape the notifications, how long it could go unseen.
 */
export const ACCESS_CACHE_TTL_MS = 60_000

/** The PostgreSQL channel of access changes (payloads: `repository:<id>`, or a table's name). */
export const ACCESS_CHANNEL = "grove_access"

/**
 * Event types (`grove.events`) that change what a token may do: a key revoked, an account
 * disabled or deleted, a membership, role or group changed, an organization or repository gone,
 * moved or made private. The event streams re-check their caller's access on these.
 */
export const ACCESS_EVENT_TYPES: ReadonlySet<string> = new Set([
  "api_key.revoked",
  "service_account.disabled",
  "service_account.enabled",
  "service_account.deleted",
  "service_account.key_revoked",
  "organization.updated",
  "organization.deleted",
  "organization.member_added",
  "organization.member_role_changed",
  "organization.member_removed",
  "organization.group_created",
  "organization.group_deleted",
  "organization.group_member_added",
  "organization.group_member_removed",
  "repository.deleted",
  "repository.transferred",
  "repository.visibility_changed"
])

export const isAccessEvent = (value: unknown): boolean =>
  typeof value === "object" && value !== null && ACCESS_EVENT_TYPES.has(String((value as { type?: unknown }).type))

/** A cache of access data (a `TtlCache`, or a view of one). */
export interface Clearable {
  readonly invalidateAll: () => void
  /** `false`: stop caching (every read loads); `true`: cache again. Either way, forget all. */
  readonly setLive: (live: boolean) => void
  /** Forgets what it holds about one repository; a cache without it holds nothing about repositories. */
  readonly invalidateRepository?: (repoId: string) => void
}

export class AccessCaches extends Context.Service<AccessCaches, {
  /** Adds a cache to those this service clears. */
  readonly register: (cache: Clearable) => void
  /** Forgets everything this node cached about access. */
  readonly invalidateAll: () => void
  /** A change notified on `ACCESS_CHANNEL`: forgets what it concerns. */
  readonly changed: (payload: string) => void
  /** Whether the caches are on: off while change notifications cannot be received. */
  readonly live: () => boolean
  readonly setLive: (live: boolean) => void
}>()("grove/server/cache/AccessCaches") {
  static readonly layer = Layer.sync(AccessCaches, () => {
    const caches: Array<Clearable> = []
    // Off until someone receives the change notifications (`AccessNotifications`): a node, or a
    // command-line tool, that does not would otherwise keep what others change.
    let live = false
    const invalidateAll = () => {
      for (const cache of caches) cache.invalidateAll()
    }
    return AccessCaches.of({
      register: (cache) => {
        caches.push(cache)
        cache.setLive(live)
      },
      invalidateAll,
      changed: (payload) => {
        if (!payload.startsWith("repository:")) return invalidateAll()
        const repoId = payload.slice("repository:".length)
        for (const cache of caches) cache.invalidateRepository?.(repoId)
      },
      live: () => live,
      setLive: (next) => {
        live = next
        for (const cache of caches) cache.setLive(next)
      }
    })
  })
}
