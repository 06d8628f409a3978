import { describe, expect, it } from "@effect/vitest"
import { classify, parseIpv6, sameAddress } from "./PublicAddress.ts"

const REFUSED = [
  "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.255", "127.0.0.1", "127.255.0.9",
  "169.254.169.254", "169.254.0.1", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.88.99.1",
  "192.168.1.1", "198.18.0.1", "198.19.255.255", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250",
  "240.0.0.1", "255.255.255.255",
  "::", "::1", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:7f00:1", "::127.0.0.1", "::8.8.8.8", "64:ff9b::8.8.8.8",
  "64:ff9b::7f00:1", "64:ff9b:1::1", "100::1", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:db8::1",
  "2001:10::1", "2002:7f00:1::1", "2002::1", "3fff::1", "fc00::1", "fd12:3456::1", "fe80::1", "febf::1", "fec0::1",
  "ff02::1", "ff05::2", "1::1", "4000::1", "[::1]"
]
const PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "198.17.255.255", "198.20.0.0", "2606:4700:4700::1111", "2a00:1450:4001:82a::200e", "2001:4860:4860::8888"]

describe("PublicAddress", () => {
  it.each(REFUSED)("refuses %s", (address) => {
    expect(classify(address).public).toBe(false)
  })

  it.each(PUBLIC)("allows %s", (address) => {
    expect(classify(address)).toEqual({ public: true })
  })

  it("parses IPv6 spellings and compares addresses by their bytes", () => {
    expect(parseIpv6("::1")).toEqual([...Array(15).fill(0), 1])
    expect(parseIpv6("1::2::3")).toBeUndefined()
    expect(parseIpv6("fe80::1%eth0")).toBeUndefined()
    expect(parseIpv6("1:2:3:4:5:6:7:8:9")).toBeUndefined()
    expect(sameAddress("::ffff:127.0.0.1", "::ffff:7f00:1")).toBe(true)
    expect(sameAddress("127.0.0.1", "127.0.0.2")).toBe(false)
    expect(classify("localhost")).toEqual({ public: false, reason: "not an IP address" })
  })
})
