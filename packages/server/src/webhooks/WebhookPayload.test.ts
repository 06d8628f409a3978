import { describe, expect, it } from "@effect/vitest"
import { backoffSeconds, chatBody, deliveryHeaders, hmacHex, payloadBody } from "./WebhookPayload.ts"
import { isChatUrl } from "./WebhookRecord.ts"

describe("WebhookPayload", () => {
  it("writes the spec's fields in order and leaves out those that do not apply", () => {
    expect(payloadBody({ event: "push", owner: "acme", repo: "app", branch: "b", commit: "c", pusher: "ann", timestamp: "2026-11-24T10:00:00.000Z" }))
      .toBe('{"event":"push","owner":"acme","repo":"app","branch":"b","commit":"c","pusher":"ann","timestamp":"2026-11-24T10:00:00.000Z"}')
    expect(payloadBody({ event: "merge", owner: "acme", repo: "app", branch: "" })).toBe('{"event":"merge","owner":"acme","repo":"app"}')
    expect(payloadBody({ event: "push", timestamp: "2026-11-24T10:00:00+00:00" })).toBe('{"event":"push","timestamp":"2026-11-24T10:00:00.000Z"}')
  })

  it("signs the body and the delivery id, timestamp and body; never a chat message", () => {
    const body = '{"event":"push"}'
    const now = new Date("2026-11-24T10:00:00Z")
    const headers = deliveryHeaders({ event: "push", deliveryId: "d-1", body, secret: "s3cret", chat: false, now })
    expect(headers).toMatchObject({
      "user-agent": "service-webhooks/1",
      "x-service-event": "push",
      "x-service-delivery-id": "d-1",
      "x-service-timestamp": "1795514400",
      "x-service-signature-256": `sha256=${hmacHex("s3cret", body)}`,
      "x-service-signature-v2": `sha256=${hmacHex("s3cret", `d-1.1795514400.${body}`)}`
    })
    expect(hmacHex("key", "The quick brown fox jumps over the lazy dog")).toBe("f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
    const chat = deliveryHeaders({ event: "push", deliveryId: "d-1", body, secret: "s3cret", chat: true, now })
    expect(chat["x-service-signature-256"]).toBeUndefined()
    expect(JSON.parse(chatBody({ event: "merge", owner: "acme", repo: "app", branch: "feature", commit: "0123456789abcdef", pusher: "ann" })))
      .toEqual({ text: "ann merged feature into main of acme/app (0123456789ab)" })
  })

  it("recognizes Slack-compatible channel URLs only", () => {
    expect(isChatUrl("https://hooks.slack.com/services/T000/B000/XXXX")).toBe(true)
    expect(isChatUrl("https://discord.com/api/webhooks/1/abc/slack")).toBe(true)
    expect(isChatUrl("http://hooks.slack.com/services/T000/B000/XXXX")).toBe(false)
    expect(isChatUrl("https://hooks.slack.com.evil.example/services/x")).toBe(false)
    expect(isChatUrl("https://example.com/hook")).toBe(false)
  })

  it("backs off exponentially with jitter, up to an hour", () => {
    expect(backoffSeconds(1, () => 0)).toBe(5)
    expect(backoffSeconds(1, () => 1)).toBe(10)
    expect(backoffSeconds(4, () => 1)).toBe(80)
    expect(backoffSeconds(20, () => 1)).toBe(3600)
  })
})
