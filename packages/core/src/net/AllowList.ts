/**
 * The operator's `--webhook-allow` list, like Gitea's `ALLOWED_HOST_LIST`: what outbound calls may
 * reach although it is not public. Entries are networks (`10.0.0.0/8`, `fd00::/8`, or one address,
 * `192.168.1.5`) and host names (`hooks.corp`, or `*.corp.example` for every name under it). An
 * allowed name may resolve to any address; an allowed network admits the addresses in it, whatever
 * name led there. Egress applies it where it applies the public-address rule: when a URL is
 * accepted and again in the socket's lookup at connection.
 */
import { parseIpv4, parseIpv6 } from "./PublicAddress.ts"

interface Network {
  readonly bytes: ReadonlyArray<number>
  readonly prefix: number
}

export interface AllowList {
  /** The entries as given, for the start-up line. */
  readonly entries: ReadonlyArray<string>
  /** Whether an address (dotted quad or IPv6) is in an allowed network. */
  readonly address: (address: string) => boolean
  /** Whether a host name (lower case, no trailing dot) is allowed. */
  readonly host: (host: string) => boolean
}

const NAME = /^(?:\*\.)?(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

const parseNetwork = (entry: string): Network | undefined => {
  const [address, prefixText, ...rest] = entry.split("/")
  if (rest.length > 0 || address === undefined) return undefined
  const bytes = parseIpv4(address) ?? parseIpv6(address)
  if (bytes === undefined) return undefined
  const bits = bytes.length * 8
  if (prefixText === undefined) return { bytes, prefix: bits }
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > bits) return undefined
  return { bytes, prefix: Number(prefixText) }
}

const contains = (network: Network, bytes: ReadonlyArray<number>): boolean => {
  if (bytes.length !== network.bytes.length) return false
  for (let bit = 0; bit < network.prefix; bit += 8) {
    const width = Math.min(8, network.prefix - bit)
    const mask = (0xff << (8 - width)) & 0xff
    if ((bytes[bit / 8]! & mask) !== (network.bytes[bit / 8]! & mask)) return false
  }
  return true
}

/** The list, or the first entry that is neither a network nor a host name. */
export const parseAllowList = (entries: ReadonlyArray<string>): AllowList | { readonly invalid: string } => {
  const networks: Array<Network> = []
  const names: Array<string> = []
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase().replace(/\.$/, "")
    const network = parseNetwork(entry)
    if (network !== undefined) networks.push(network)
    else if (NAME.test(entry)) names.push(entry)
    else return { invalid: raw }
  }
  return {
    entries,
    address: (address) => {
      const bytes = parseIpv4(address) ?? parseIpv6(address)
      return bytes !== undefined && networks.some((network) => contains(network, bytes))
    },
    host: (host) => names.some((name) => name.startsWith("*.") ? host.endsWith(name.slice(1)) : host === name)
  }
}

export const EMPTY_ALLOW_LIST: AllowList = { entries: [], address: () => false, host: () => false }
