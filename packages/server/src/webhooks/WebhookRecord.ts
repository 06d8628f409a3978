/** A webhook as stored, and its API form; shared by the read side and the Repository entity's commands. */
import type { ApiWebhooks } from "@grove/api"

export interface WebhookRow {
  readonly id: string
  readonly repo_id: string
  readonly url: string
  readonly secret_sealed: string | null
  readonly events: unknown
  readonly created_by: string
  readonly created_at: Date | string
}

/**
 * The event a repository's webhook commands emit (on `grove.events`, keyed like the repository's other
 * events, so in order with them): the fan-out forgets what it knew of the repository's webhooks.
 */
export const WEBHOOKS_CHANGED = "webhooks.changed"

/**
 * The events after which the fan-out forgets a repository's webhooks: its webhooks changed, or it was
 * transferred (its later events, and changes, go under another key: see WebhookFanout's `known`).
 */
const FORGETTING = new Set([WEBHOOKS_CHANGED, "repository.transferred"])

/** The repository whose remembered webhooks `value` makes stale, if it is such an event. */
export const forgottenBy = (value: unknown): string | undefined => {
  const event = value as { readonly type?: unknown; readonly repository_id?: unknown } | null
  return event !== null && typeof event === "object" && FORGETTING.has(event.type as string) && typeof event.repository_id === "string"
    ? event.repository_id
    : undefined
}

export const ALL_EVENTS: ReadonlyArray<ApiWebhooks.WebhookEvent> = ["push", "branch.created", "merge"]

export const eventsOf = (row: Pick<WebhookRow, "events">): ReadonlyArray<ApiWebhooks.WebhookEvent> => {
  const events = (typeof row.events === "string" ? JSON.parse(row.events) : row.events) as ReadonlyArray<ApiWebhooks.WebhookEvent>
  return events.length === 0 ? ALL_EVENTS : events
}

/** Slack-compatible incoming-webhook URLs: Slack's own, and Discord's `/slack` endpoints. */
export const isChatUrl = (raw: string): boolean => {
  try {
    const url = new URL(raw)
    const host = url.hostname.toLowerCase()
    return url.protocol === "https:" && (
      (host === "hooks.slack.com" && url.pathname.startsWith("/services/")) ||
      ((host === "discord.com" || host === "discordapp.com") && /^\/api\/webhooks\/[^/]+\/[^/]+\/slack$/.test(url.pathname))
    )
  } catch {
    return false
  }
}

export const toApiWebhook = (row: WebhookRow): ApiWebhooks.Webhook => ({
  id: row.id,
  url: row.url,
  events: eventsOf(row),
  has_secret: row.secret_sealed !== null,
  chat: isChatUrl(row.url),
  created_by: row.created_by,
  created_at: new Date(row.created_at).toISOString()
})
