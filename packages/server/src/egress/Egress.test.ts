import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as os from "node:os"
import { startFakeDns } from "../../../../test/support/FakeDns.ts"
import { parseAllowList } from "@grove/core/net/AllowList"
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

  it("--webhook-allow entries: networks (CIDR or one address, any spelling) and host names (exact or *.suffix)", () => {
    const list = parseAllowList(["10.0.0.0/8", "192.168.1.5", "fd00::/8", "hooks.corp", "*.corp.example", "Upper.Example."])
    if ("invalid" in list) throw new Error(list.invalid)
    for (const inside of ["10.0.0.1", "10.255.255.255", "192.168.1.5", "fd12::1"]) expect(list.address(inside), inside).toBe(true)
    for (const outside of ["11.0.0.1", "192.168.1.6", "fe80::1", "127.0.0.1"]) expect(list.address(outside), outside).toBe(false)
    for (const name of ["hooks.corp", "a.corp.example", "b.a.corp.example", "upper.example"]) expect(list.host(name), name).toBe(true)
    for (const name of ["corp.example", "xhooks.corp", "hooks.corp.evil", "evilcorp.example"]) expect(list.host(name), name).toBe(false)
    expect(parseAllowList(["127.0.0.1/33"])).toEqual({ invalid: "127.0.0.1/33" })
    expect(parseAllowList(["not a host"])).toEqual({ invalid: "not a host" })
    expect(parseAllowList(["10.0.0.0/8/1"])).toEqual({ invalid: "10.0.0.0/8/1" })
  })

  it.effect("an allowed network or name is let through at check and at connection, and nothing beside it", () =>
    Effect.gen(function*() {
      const dns = yield* Effect.promise(startFakeDns)
      dns.set("hooks.corp.test", "10.1.2.3")
      dns.set("in-net.test", "127.0.0.1")
      dns.set("other.corp.test", "10.9.9.9")
      const list = parseAllowList(["127.0.0.0/30", "hooks.corp.test"])
      if ("invalid" in list) throw new Error(list.invalid)
      const egress = makeEgress({ allow: [], dnsServers: [dns.address], allowList: list })
      expect((yield* egress.check("http://127.0.0.3:9/x")).hostname).toBe("127.0.0.3")
      expect((yield* egress.check("http://in-net.test:9/x")).hostname).toBe("in-net.test")
      expect((yield* egress.check("http://hooks.corp.test/x")).hostname).toBe("hooks.corp.test")
      for (const url of ["http://127.0.0.4/", "http://other.corp.test/", "http://10.1.2.3/", "http://localhost/", "http://169.254.169.254/"]) {
        expect((yield* Effect.result(egress.check(url)))._tag, url).toBe("Failure")
      }
      // At connection: an allowed network's address is connected to (a closed port fails as a network error, not a refusal);
      // a name that moved out of the network is refused there.
      const options = { headers: {}, body: "{}", timeoutMs: 2000, maxResponseBytes: 1024 }
      const connected = yield* Effect.result(egress.post("http://in-net.test:1/hook", options))
      expect(connected._tag === "Failure" && connected.failure._tag).toBe("EgressFailed")
      dns.set("in-net.test", "127.0.0.9")
      const moved = yield* Effect.result(egress.post("http://in-net.test:1/hook", options))
      expect(moved._tag === "Failure" && moved.failure._tag).toBe("EgressRefused")
      yield* Effect.promise(dns.close)
    }))
})
