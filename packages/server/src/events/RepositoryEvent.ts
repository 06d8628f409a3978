/**
 * The repository events that leave the server (`push`, `branch.created`, `merge` on
 * `grove.events`), as their consumers read them: CI's automatic triggers and the webhook fan-out.
 */
export type DeliveredEventType = "push" | "branch.created" | "merge"

export interface RepositoryEvent {
  readonly type: DeliveredEventType
  /** Unique per event: consumers deduplicate by it. */
  readonly id: string
  readonly repository_id: string
  readonly owner?: string
  readonly repo?: string
  readonly branch?: string
  readonly commit?: string
  /** A `merge`'s squash commit's root tree (its hash covers it): CI's triggers need not read the commit. Internal: no payload sends it. */
  readonly tree?: string
  readonly pusher?: string
  readonly timestamp?: string
}

const TYPES: ReadonlySet<string> = new Set(["push", "branch.created", "merge"])

/** The record's value as a repository event, or undefined for anything else on the topic. */
export const repositoryEventOf = (value: unknown): RepositoryEvent | undefined => {
  const event = value as Partial<RepositoryEvent> | null
  if (event === null || typeof event !== "object" || !TYPES.has(String(event.type))) return undefined
  return typeof event.id === "string" && typeof event.repository_id === "string" ? event as RepositoryEvent : undefined
}
