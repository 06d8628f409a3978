/**
 * What this node caches about who may do what (tokens, roles, organizations, repositories), and
 * the events after which all of it is forgotten. A change made on this node clears the caches at
 * once; a change made on another node reaches this one through the events topic
 * (`AccessEventsFollower`), well inside the caches' own time-to-live.
 */
import { Context, Layer } from "effect"

/**
 * Event types (`grove.events`) that change what a token may do: a key revoked, an account
 * disabled or deleted, a membership, role or group changed, an organization or repository gone,
 * moved or made private. Commands that make such a change append one of these in their transaction.
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

export interface Clearable {
  readonly invalidateAll: () => void
}

export class AccessCaches extends Context.Service<AccessCaches, {
  /** Adds a cache to those cleared by `invalidateAll`. */
  readonly register: (cache: Clearable) => void
  /** Forgets everything this node cached about access. */
  readonly invalidateAll: () => void
}>()("grove/server/cache/AccessCaches") {
  static readonly layer = Layer.sync(AccessCaches, () => {
    const caches: Array<Clearable> = []
    return AccessCaches.of({
      register: (cache) => void caches.push(cache),
      invalidateAll: () => {
        for (const cache of caches) cache.invalidateAll()
      }
    })
  })
}
