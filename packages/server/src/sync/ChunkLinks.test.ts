/**
 * The origin chunk links are built on: what a proxy says the client asked for, else the Host
 * header, else the site URL; never a header that is not a plain host[:port].
 */
import { describe, expect, it } from "@effect/vitest"
import { requestOrigin } from "./ChunkLinks.ts"

const SITE = "http://grove.example:8080"

describe("requestOrigin", () => {
  it("uses the Host header with the site URL's scheme", () => {
    expect(requestOrigin({ host: "127.0.0.1:4000" }, SITE)).toBe("http://127.0.0.1:4000")
    expect(requestOrigin({ host: "[::1]:4000" }, "https://g.example")).toBe("https://[::1]:4000")
  })

  it("prefers the first X-Forwarded-Host and honours X-Forwarded-Proto https", () => {
    expect(requestOrigin({ host: "10.0.0.5:3000", "x-forwarded-host": "code.example.org, proxy.internal", "x-forwarded-proto": "https" }, SITE))
      .toBe("https://code.example.org")
  })

  it("ignores a forwarded host that is not a plain host and falls back to the site URL for a bad Host", () => {
    expect(requestOrigin({ host: "a.example", "x-forwarded-host": "evil.example/path" }, SITE)).toBe("http://a.example")
    expect(requestOrigin({ host: "a.example@b" }, SITE)).toBe(SITE)
    expect(requestOrigin({}, SITE)).toBe(SITE)
  })
})
