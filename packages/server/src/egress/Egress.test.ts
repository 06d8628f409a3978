import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as os from "node:os"
import { startFakeDns } from "../../../../test/support/FakeDns.ts"
import { makeEgress } from "./Egress.ts"

/** Every form the issue names; refused with no allow-list. */
const REFUSED = [
  "http://127.0.0.1/", "http://127.0.0.1:8080/hook", "http://localhost/", "http://localhost./", "http://LOCALHOST:80/", "http://app.localhost/",
  `http://${os.hostname()}/`, `http://${os.hostname()}./`, "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://[::127.0.0.1]/",
  "http://2130706433/", "http://0177.0.0.1/", "http://0x7f.0.0.1/", "http://0x7f000001/", "http://127.1/", "http://127.0.1/",
  "http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/", "http://100.64.0.1/", "http://198.18.0.1/", "http://224.0.0.1/",
  "http://255.255.255.255/", "http://0.0.0.0/", "http://0/", "http://10.0.0.1/", "http://192.168.1.1/", "http://172.16.0.1/", "http://[64:ff9b::7f00:1]/",
  "http://[64:ff9b:1::1]/", "http://[2002:7f00:1::1]/", "http://[2001::1]/", "http://[fc00::1]/", "http://[fd00::1]/", "http://[fe80::1]/", "http://[::]/",
  "ftp://example.com/", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)", "http://user:pass@example.com/",
  "http://example.com@127.0.0.1/", "http://intranet/", "not a url", "http:///nohost",
  // Names that resolve to refused addresses (the fake resolver below).
  "http://loop.test/", "http://private.test/", "http://mixed.test/", "http://missing.test/"
]

describe("Egress", () => {
  it.effect("refuses every non-public form at check, with the allow-list off", () =>
    Effect.gen(function*() {
      const dns = yield* Effect.promise(startFakeDns)
      dns.set("loop.test", "127.0.0.1")
      dns.set("private.test", "10.1.2.3")
      dns.set("mixed.test", "192.168.0.1")
      dns.set("public.test", "93.184.216.34")
      const egress = makeEgress({ allow: [], dnsServers: [dns.address] })
      for (const url of REFUSED) {
        const result = yield* Effect.result(egress.check(url))
        expect(result._tag, url).toBe("Failure")
      }
      expect((yield* egress.check("https://public.test/hook")).href).toBe("https://public.test/hook")
      expect((yield* egress.check("http://93.184.216.34:8080/x")).hostname).toBe("93.184.216.34")
      yield* Effect.promise(dns.close)
    }))

  it.effect("lets an allow-listed exact address through, and nothing near it", () =>
    Effect.gen(function*() {
      const dns = yield* Effect.promise(startFakeDns)
      dns.set("receiver.test", "127.0.0.1")
      dns.set("near.test", "127.0.0.2")
      const egress = makeEgress({ allow: ["127.0.0.1"], dnsServers: [dns.address] })
      expect((yield* egress.check("http://127.0.0.1:9/x")).port).toBe("9")
      expect((yield* egress.check("http://receiver.test:9/x")).hostname).toBe("receiver.test")
      expect((yield* Effect.result(egress.check("http://near.test/")))._tag).toBe("Failure")
      expect((yield* Effect.result(egress.check("http://127.0.0.2/")))._tag).toBe("Failure")
      expect((yield* Effect.result(egress.check("http://localhost/")))._tag).toBe("Failure")
      yield* Effect.promise(dns.close)
    }))

  it.effect("checks again at connection: a name that moved to a refused address is not called", () =>
    Effect.gen(function*() {
      const dns = yield* Effect.promise(startFakeDns)
      dns.set("rebind.test", "93.184.216.34")
      const egress = makeEgress({ allow: [], dnsServers: [dns.address] })
      yield* egress.check("http://rebind.test:1/hook")
      dns.set("rebind.test", "127.0.0.1")
      const result = yield* Effect.result(egress.post("http://rebind.test:1/hook", { headers: {}, body: "{}", timeoutMs: 2000, maxResponseBytes: 1024 }))
      expect(result._tag).toBe("Failure")
      if (result._tag === "Failure") {
        expect(result.failure._tag).toBe("EgressRefused")
        expect(String((result.failure as { reason?: string }).reason)).toContain("refused at connection")
      }
      yield* Effect.promise(dns.close)
    }))
})
