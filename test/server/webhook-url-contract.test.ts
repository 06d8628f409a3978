/**
 * The webhook `url` the OpenAPI document describes is one the server's check takes (C5, ST202: the
 * document said a bare string, so a fuzzer's non-URL was "valid" and answered 400). Every URL the
 * document's pattern admits passes the egress check's parse (an allow-list trusting every host
 * stands in for DNS, which no schema can say); the fuzzer's value and other non-URLs fail both.
 */
import { describe, expect, it } from "@effect/vitest"
import { GroveApi } from "@grove/api"
import { URL_MAX, URL_PATTERN } from "@grove/api/WebhookGroups"
import { Effect } from "effect"
import { OpenApi } from "effect/http-api"
import { makeEgress } from "../../packages/server/src/egress/Egress.ts"

const egress = makeEgress({ allow: [], dnsServers: [], allowList: { entries: [], address: () => true, host: () => true } })
const pattern = new RegExp(URL_PATTERN)

/** A seeded generator of strings the pattern's grammar makes, edges included (ports, xn--, trailing dot, any path). */
const generated = (count: number): Array<string> => {
  let seed = 20261128
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
  const pick = (chars: string, min: number, max: number) =>
    Array.from({ length: min + Math.floor(next() * (max - min + 1)) }, () => chars[Math.floor(next() * chars.length)]).join("")
  const LABEL = "abcxyzABCZ0189_-"
  const PATH = "/?#%:@[]\\<>^|{}`'\"aZ9.~\u00a0\u00e9\u0119\u011c\ud8cb\ud83d\ude00\u200b\ufeff"
  return Array.from({ length: count }, (_, i) => {
    const scheme = ["http", "https", "HTTP", "hTtPs"][i % 4]
    const labels = Array.from({ length: Math.floor(next() * 4) }, () => pick(LABEL, 1, 8))
    const last = (next() < 0.2 ? "xn--" : pick("aZ", 1, 1)) + pick(LABEL, 0, 10)
    const host = [...labels, last].join(".") + (next() < 0.1 ? "." : "")
    const port = next() < 0.3 ? `:${["0", "80", "65535", "0065", "8443", "10000", "59999"][Math.floor(next() * 7)]}` : ""
    const rest = next() < 0.7 ? "/?#"[Math.floor(next() * 3)] + pick(PATH, 0, 30) : ""
    return `${scheme}://${host}${port}${rest}`
  })
}

describe("webhook url contract", () => {
  it("the document's webhook url says http(s), a host, at most 2048 characters", () => {
    const spec = OpenApi.fromApi(GroveApi) as unknown as {
      paths: Record<string, { post: { requestBody: { content: Record<string, { schema: { properties: Record<string, Record<string, unknown>> } }> } } }>
    }
    const url = spec.paths["/api/{owner}/{name}/webhooks"]!.post.requestBody.content["application/json"]!.schema.properties["url"]!
    expect(url["pattern"]).toBe(URL_PATTERN)
    expect(url["maxLength"]).toBe(URL_MAX)
    expect(url["minLength"]).toBe(1)
  })

  it.effect("a URL the pattern admits is taken by the server's check", () =>
    Effect.gen(function*() {
      const examples = [
        "https://hooks.example.com/grove",
        "http://example.com",
        "HTTPS://Example.COM.:65535/a%20b?x=1#y",
        "http://a_b.example-.xn--zz/%zz\\..",
        "http://h0st.x9:0?ęĜm\ud8cb",
        ...generated(2000)
      ]
      for (const url of examples) {
        expect(pattern.test(url), url).toBe(true)
        expect(url.length).toBeLessThanOrEqual(URL_MAX)
        const result = yield* Effect.result(egress.check(url))
        expect(result._tag, `${url}: ${JSON.stringify(result)}`).toBe("Success")
      }
    }))

  it.effect("what the server refuses as no URL, the pattern refuses too", () =>
    Effect.gen(function*() {
      for (const url of ["ęĜm\ud8cb", "not a url", "ftp://example.com/", "http://user:pw@example.com/", "http:///nohost", "http://1.2.3.999/", "http://0xffffffffff/", "http://x.y:65536/", "http://a.0x1/", "mailto:a@b.c", "http://[::1]/"]) {
        expect(pattern.test(url), url).toBe(false)
      }
      for (const url of ["ęĜm\ud8cb", "not a url", "ftp://example.com/", "http://user:pw@example.com/", "http://1.2.3.999/", "http://x.y:65536/"]) {
        expect((yield* Effect.result(egress.check(url)))._tag, url).toBe("Failure")
      }
    }))
})
