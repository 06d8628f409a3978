/**
 * What a delivery sends. The body is the spec's payload (`event`, `owner`, `repo`, `branch`,
 * `commit`, `pusher`, `timestamp`; a field that does not apply is left out), made once at fan-out
 * and kept byte for byte, so every retry carries the same body and the same signature. Headers:
 * `User-Agent: service-webhooks/1`, `X-Service-Event`, `X-Service-Delivery-Id` and, with a secret,
 * `X-Service-Signature-256: sha256=<hex HMAC-SHA256 of the body>`. Beyond the spec, in the manner
 * of Standard Webhooks: `X-Service-Timestamp` (Unix seconds, per attempt) and
 * `X-Service-Signature-V2: sha256=<hex HMAC-SHA256 of "<delivery id>.<timestamp>.<body>">`, so a
 * receiver can refuse an old or replayed request. A chat channel gets `{"text": ...}`, unsigned.
 */
import { createHmac } from "node:crypto"
import type { RepositoryEvent } from "../events/RepositoryEvent.ts"

/** A repository event's facts, with its kind as the payload's `event`. */
export type EventFacts = Omit<RepositoryEvent, "type" | "id" | "repository_id"> & { readonly event: string }

const FIELDS = ["event", "owner", "repo", "branch", "commit", "pusher", "timestamp"] as const

/** The JSON body in the spec's field order; absent or null fields are left out. */
export const payloadBody = (facts: EventFacts): string => {
  const out: Record<string, string> = {}
  for (const field of FIELDS) {
    const value = facts[field]
    if (typeof value === "string" && value.length > 0) out[field] = field === "timestamp" ? rfc3339(value) : value
  }
  return JSON.stringify(out)
}

/** RFC 3339 in UTC with a Z. */
const rfc3339 = (value: string) => {
  const date = new Date(value)
  return Number.isNaN(date.getTime()) ? value : date.toISOString()
}

/** A line people read in a chat channel. */
export const chatBody = (facts: EventFacts): string => {
  const repo = `${facts.owner ?? "?"}/${facts.repo ?? "?"}`
  const commit = facts.commit === undefined ? "" : ` (${facts.commit.slice(0, 12)})`
  const who = facts.pusher ?? "someone"
  const text = facts.event === "merge"
    ? `${who} merged ${facts.branch ?? "a branch"} into main of ${repo}${commit}`
    : facts.event === "branch.created"
    ? `${who} created branch ${facts.branch ?? "?"} in ${repo}${commit}`
    : `${who} pushed to ${facts.branch ?? "?"} in ${repo}${commit}`
  return JSON.stringify({ text })
}

export const hmacHex = (secret: string, data: string) => createHmac("sha256", secret).update(data, "utf8").digest("hex")

export const deliveryHeaders = (options: {
  readonly event: string
  readonly deliveryId: string
  readonly body: string
  readonly secret: string | undefined
  readonly chat: boolean
  readonly now: Date
}): Record<string, string> => {
  const timestamp = String(Math.floor(options.now.getTime() / 1000))
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "service-webhooks/1",
    "x-service-event": options.event,
    "x-service-delivery-id": options.deliveryId,
    "x-service-timestamp": timestamp
  }
  if (options.secret !== undefined && !options.chat) {
    headers["x-service-signature-256"] = `sha256=${hmacHex(options.secret, options.body)}`
    headers["x-service-signature-v2"] = `sha256=${hmacHex(options.secret, `${options.deliveryId}.${timestamp}.${options.body}`)}`
  }
  return headers
}

/**
 * Seconds to wait before attempt `attempts + 1`: exponential from `base` (10 s), capped at an hour,
 * jittered over the upper half of each step.
 */
export const backoffSeconds = (attempts: number, random = Math.random, base = 10) => {
  const ceiling = Math.min(3600, base * 2 ** Math.max(0, attempts - 1))
  return ceiling / 2 + random() * (ceiling / 2)
}

/** Deliveries are retried for a day, then given up ("dead"). */
export const GIVE_UP_AFTER_MS = 24 * 60 * 60 * 1000
