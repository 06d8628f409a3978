/**
 * Which IP addresses an outbound call (a webhook delivery) may reach: public unicast only. Refused:
 * loopback, private, link-local (with the 169.254.169.254 metadata address), CGNAT, benchmarking,
 * documentation, multicast, broadcast, reserved and unspecified IPv4; and in IPv6 the same kinds
 * plus IPv4-mapped and IPv4-compatible addresses, NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4
 * (2002::/16), Teredo and the rest of 2001::/23, ULA (fc00::/7) and everything outside 2000::/3.
 * Addresses arrive canonical (from a resolver or the WHATWG URL parser, which already turned
 * decimal, octal, hex and short IPv4 spellings into dotted quads).
 */
export type Verdict = { readonly public: true } | { readonly public: false; readonly reason: string }

const PUBLIC: Verdict = { public: true }
const refuse = (reason: string): Verdict => ({ public: false, reason })

/** The four bytes of a dotted quad, or undefined. */
export const parseIpv4 = (text: string): ReadonlyArray<number> | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4) return undefined
  const bytes = parts.map((part) => /^(?:0|[1-9][0-9]{0,2})$/.test(part) ? Number(part) : NaN)
  return bytes.every((b) => b >= 0 && b <= 255) ? bytes : undefined
}

/** The sixteen bytes of an IPv6 address (with `::` and an embedded IPv4 tail), or undefined. */
export const parseIpv6 = (input: string): ReadonlyArray<number> | undefined => {
  const text = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input
  if (text.includes("%") || !text.includes(":")) return undefined
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const groups = (half: string): Array<number> | undefined => {
    if (half === "") return []
    const out: Array<number> = []
    const parts = half.split(":")
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!
      if (i === parts.length - 1 && part.includes(".")) {
        const v4 = parseIpv4(part)
        if (v4 === undefined) return undefined
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!)
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(part)) return undefined
        out.push(parseInt(part, 16))
      }
    }
    return out
  }
  const head = groups(halves[0]!)
  const tail = halves.length === 2 ? groups(halves[1]!) : []
  if (head === undefined || tail === undefined) return undefined
  const missing = 8 - head.length - tail.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined
  const all = [...head, ...Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail]
  return all.flatMap((group) => [group >> 8, group & 0xff])
}

const inV4 = (bytes: ReadonlyArray<number>, net: readonly [number, number, number, number], bits: number) => {
  for (let i = 0; i < 4; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8))
    const mask = take === 0 ? 0 : (0xff << (8 - take)) & 0xff
    if ((bytes[i]! & mask) !== (net[i]! & mask)) return false
  }
  return true
}

const V4_REFUSED: ReadonlyArray<readonly [readonly [number, number, number, number], number, string]> = [
  [[0, 0, 0, 0], 8, "an unspecified ('this network') address"],
  [[10, 0, 0, 0], 8, "a private address"],
  [[100, 64, 0, 0], 10, "a shared (CGNAT) address"],
  [[127, 0, 0, 0], 8, "a loopback address"],
  [[169, 254, 0, 0], 16, "a link-local address (including the cloud metadata service)"],
  [[172, 16, 0, 0], 12, "a private address"],
  [[192, 0, 0, 0], 24, "a reserved (IETF protocol) address"],
  [[192, 0, 2, 0], 24, "a documentation address"],
  [[192, 88, 99, 0], 24, "a reserved (6to4 relay) address"],
  [[192, 168, 0, 0], 16, "a private address"],
  [[198, 18, 0, 0], 15, "a benchmarking address"],
  [[198, 51, 100, 0], 24, "a documentation address"],
  [[203, 0, 113, 0], 24, "a documentation address"],
  [[224, 0, 0, 0], 4, "a multicast address"],
  [[240, 0, 0, 0], 4, "a reserved or broadcast address"]
]

export const classifyIpv4 = (bytes: ReadonlyArray<number>): Verdict => {
  for (const [net, bits, reason] of V4_REFUSED) if (inV4(bytes, net, bits)) return refuse(reason)
  return PUBLIC
}

const prefix = (bytes: ReadonlyArray<number>, net: ReadonlyArray<number>, bits: number) => {
  for (let i = 0; i * 8 < bits; i++) {
    const take = Math.min(8, bits - i * 8)
    const mask = (0xff << (8 - take)) & 0xff
    if ((bytes[i]! & mask) !== ((net[i] ?? 0) & mask)) return false
  }
  return true
}

const V6_REFUSED: ReadonlyArray<readonly [ReadonlyArray<number>, number, string]> = [
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96, "an IPv4-mapped IPv6 address"],
  [[0x00, 0x64, 0xff, 0x9b], 96, "a NAT64 address"],
  [[0x00, 0x64, 0xff, 0x9b, 0x00, 0x01], 48, "a NAT64 address"],
  [[0x01, 0x00], 64, "a discard-only address"],
  [[0x20, 0x01, 0x00, 0x00], 32, "a Teredo address"],
  [[0x20, 0x01, 0x0d, 0xb8], 32, "a documentation address"],
  [[0x20, 0x01], 23, "a reserved (IETF protocol) address"],
  [[0x20, 0x02], 16, "a 6to4 address"],
  [[0x3f, 0xff], 20, "a documentation address"],
  [[0xfc], 7, "a unique local (private) address"],
  [[0xfe, 0x80], 10, "a link-local address"],
  [[0xfe, 0xc0], 10, "a site-local address"],
  [[0xff], 8, "a multicast address"]
]

export const classifyIpv6 = (bytes: ReadonlyArray<number>): Verdict => {
  if (bytes.every((b) => b === 0)) return refuse("the unspecified address")
  if (bytes.slice(0, 15).every((b) => b === 0) && bytes[15] === 1) return refuse("a loopback address")
  // ::a.b.c.d, the deprecated IPv4-compatible form.
  if (bytes.slice(0, 12).every((b) => b === 0)) return refuse("an IPv4-compatible IPv6 address")
  for (const [net, bits, reason] of V6_REFUSED) if (prefix(bytes, net, bits)) return refuse(reason)
  // Only global unicast (2000::/3) is routed on the internet.
  if ((bytes[0]! & 0xe0) !== 0x20) return refuse("a reserved address")
  return PUBLIC
}

/** The verdict on an address in text (dotted quad or IPv6); anything else is not an address. */
export const classify = (address: string): Verdict => {
  const v4 = parseIpv4(address)
  if (v4 !== undefined) return classifyIpv4(v4)
  const v6 = parseIpv6(address)
  if (v6 !== undefined) return classifyIpv6(v6)
  return refuse("not an IP address")
}

/** Whether `host` (a URL's hostname, brackets and all) is an IP literal. */
export const isIpLiteral = (host: string) => parseIpv4(host) !== undefined || parseIpv6(host) !== undefined

/** Two spellings of one address are equal by their bytes. */
export const sameAddress = (a: string, b: string): boolean => {
  const x = parseIpv4(a) ?? parseIpv6(a)
  const y = parseIpv4(b) ?? parseIpv6(b)
  return x !== undefined && y !== undefined && x.length === y.length && x.every((byte, i) => byte === y[i])
}
