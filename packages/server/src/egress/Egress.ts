/**
 * The one way the server calls out (webhook deliveries now, anything later): an http or https
 * URL without userinfo, whose name resolves only to public addresses (`core/net/PublicAddress`),
 * checked when the URL is accepted and again inside the socket's own lookup at the moment of
 * connection, so a name that resolves elsewhere by then (DNS rebinding) is refused. Redirects are
 * not followed; an attempt has a deadline and reads at most a bounded part of the answer.
 *
 * Operators open networks and host names on an internal network with `--webhook-allow`
 * (`@grove/core/net/AllowList`), shown at start. Tests may still use `GROVE_UNSAFE_EGRESS_ALLOW` (exact addresses,
 * from the environment only, warned about at start).
 */
import { classify, isIpLiteral, sameAddress } from "@grove/core/net/PublicAddress"
import { Context, Data, Effect, Layer } from "effect"
import * as dns from "node:dns"
import * as http from "node:http"
import * as https from "node:https"
import type { LookupFunction } from "node:net"
import * as os from "node:os"
import { ServerConfig } from "../Config.ts"
import { type AllowList, EMPTY_ALLOW_LIST, parseAllowList } from "@grove/core/net/AllowList"

/** The URL or an address it resolves to may not be called; `reason` says why (never the addresses). */
export class EgressRefused extends Data.TaggedError("EgressRefused")<{ readonly reason: string }> {}
/** The call was made and failed: network error, timeout. */
export class EgressFailed extends Data.TaggedError("EgressFailed")<{ readonly message: string }> {}

export interface Answer {
  readonly status: number
  /** At most `maxResponseBytes` of the body. */
  readonly body: string
  readonly durationMs: number
}

export interface PostOptions {
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly timeoutMs: number
  readonly maxResponseBytes: number
}

const REFUSED_NAMES = ["localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "broadcasthost"]
const REFUSED_SUFFIXES = [".localhost", ".local", ".internal", ".home.arpa", ".localdomain"]

export const makeEgress = (options: {
  readonly allow: ReadonlyArray<string>
  readonly dnsServers: ReadonlyArray<string>
  /** The operator's `--webhook-allow`. */
  readonly allowList?: AllowList | undefined
}) => {
  const allowList = options.allowList ?? EMPTY_ALLOW_LIST
  const ownNames = new Set([os.hostname().toLowerCase(), os.hostname().toLowerCase().split(".")[0]!])
  /** A host name the operator allowed: whatever it resolves to may be called. */
  const trustedName = (hostname: string) => allowList.host(hostname.toLowerCase().replace(/\.$/, ""))
  const allowed = (address: string): { readonly ok: true } | { readonly ok: false; readonly reason: string } => {
    if (options.allow.some((exact) => sameAddress(exact, address)) || allowList.address(address)) return { ok: true }
    const verdict = classify(address)
    return verdict.public ? { ok: true } : { ok: false, reason: verdict.reason }
  }
  const resolver = options.dnsServers.length === 0 ? undefined : (() => {
    const r = new dns.promises.Resolver({ timeout: 2000, tries: 1 })
    r.setServers([...options.dnsServers])
    return r
  })()
  /** Every address of `host` (A and AAAA). */
  const resolve = async (host: string): Promise<ReadonlyArray<string>> => {
    if (resolver === undefined) return (await dns.promises.lookup(host, { all: true, verbatim: true })).map((entry) => entry.address)
    const settled = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)])
    const found = settled.flatMap((result) => result.status === "fulfilled" ? result.value : [])
    if (found.length === 0) {
      const failure = settled.find((result): result is PromiseRejectedResult => result.status === "rejected")
      throw failure?.reason ?? new Error("no address")
    }
    return found
  }

  /** What can be said of a URL without resolving it; answers the parsed URL and its bare host. */
  const parse = (raw: string) => {
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return { refused: "the URL is not a valid absolute URL" } as const
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return { refused: "only http and https URLs are allowed" } as const
    if (url.username !== "" || url.password !== "") return { refused: "the URL must not carry a user name or password" } as const
    const host = url.hostname.toLowerCase().replace(/\.$/, "")
    if (host === "") return { refused: "the URL has no host" } as const
    if (isIpLiteral(host)) {
      const verdict = allowed(host)
      return verdict.ok ? { url, host, literal: true } as const : { refused: `the URL's address is ${verdict.reason}` } as const
    }
    if (trustedName(host)) return { url, host, literal: false } as const
    if (REFUSED_NAMES.includes(host) || REFUSED_SUFFIXES.some((suffix) => host.endsWith(suffix)) || ownNames.has(host) || !host.includes(".")) {
      return { refused: "the URL's host names this machine or a local network" } as const
    }
    return { url, host, literal: false } as const
  }

  /** Resolves and checks every address; the first refusal wins. */
  const checkAddresses = async (host: string): Promise<string | undefined> => {
    if (trustedName(host)) return undefined
    let addresses: ReadonlyArray<string>
    try {
      addresses = await resolve(host)
    } catch {
      return "the URL's host does not resolve"
    }
    if (addresses.length === 0) return "the URL's host does not resolve"
    for (const address of addresses) {
      const verdict = allowed(address)
      if (!verdict.ok) return `the URL's host resolves to ${verdict.reason}`
    }
    return undefined
  }

  /** The socket's lookup: resolved now, at connection, and refused unless every address is allowed. */
  const guardedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
    resolve(hostname).then((addresses) => {
      for (const address of trustedName(hostname) ? [] : addresses) {
        const verdict = allowed(address)
        if (!verdict.ok) {
          callback(Object.assign(new Error(`refused at connection: the host resolves to ${verdict.reason}`), { code: "EGRESS_REFUSED" }), "", 4)
          return
        }
      }
      const entries = addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }))
      if (lookupOptions.all === true) (callback as unknown as (e: null, all: typeof entries) => void)(null, entries)
      else callback(null, entries[0]!.address, entries[0]!.family)
    }, (error: unknown) => callback(error as NodeJS.ErrnoException, "", 4))
  }

  const check = (raw: string): Effect.Effect<URL, EgressRefused> =>
    Effect.gen(function*() {
      const parsed = parse(raw)
      if ("refused" in parsed) return yield* new EgressRefused({ reason: parsed.refused })
      if (!parsed.literal) {
        const refused = yield* Effect.promise(() => checkAddresses(parsed.host))
        if (refused !== undefined) return yield* new EgressRefused({ reason: refused })
      }
      return parsed.url
    })

  const post = (raw: string, post: PostOptions): Effect.Effect<Answer, EgressRefused | EgressFailed> =>
    Effect.gen(function*() {
      const parsed = parse(raw)
      if ("refused" in parsed) return yield* new EgressRefused({ reason: parsed.refused })
      const started = performance.now()
      const outcome = yield* Effect.callback<Answer | { refused: string } | { failed: string }>((resume) => {
        const client = parsed.url.protocol === "https:" ? https : http
        let done = false
        const finish = (value: Answer | { refused: string } | { failed: string }) => {
          if (done) return
          done = true
          clearTimeout(timer)
          resume(Effect.succeed(value))
        }
        const request = client.request(parsed.url, {
          method: "POST",
          headers: { ...post.headers, "content-length": String(Buffer.byteLength(post.body)) },
          // A fresh connection every time, looked up (and checked) now.
          agent: false,
          lookup: guardedLookup
        }, (response) => {
          const parts: Array<Buffer> = []
          let size = 0
          const settle = () =>
            finish({
              status: response.statusCode ?? 0,
              body: Buffer.concat(parts).toString("utf8"),
              durationMs: Math.round(performance.now() - started)
            })
          response.on("data", (part: Buffer) => {
            if (size < post.maxResponseBytes) parts.push(part.subarray(0, post.maxResponseBytes - size))
            size += part.length
            // Enough read: the rest of a large answer is not waited for.
            if (size >= post.maxResponseBytes) {
              settle()
              response.destroy()
            }
          })
          response.on("end", settle)
          response.on("error", settle)
        })
        const timer = setTimeout(() => {
          finish({ failed: `no answer within ${post.timeoutMs / 1000} s` })
          request.destroy()
        }, post.timeoutMs)
        request.on("error", (error: NodeJS.ErrnoException) =>
          finish(error.code === "EGRESS_REFUSED" ? { refused: error.message } : { failed: error.message || error.code || "network error" }))
        request.end(post.body)
        return Effect.sync(() => {
          done = true
          clearTimeout(timer)
          request.destroy()
        })
      })
      if ("refused" in outcome) return yield* new EgressRefused({ reason: outcome.refused })
      if ("failed" in outcome) return yield* new EgressFailed({ message: outcome.failed })
      return outcome
    })

  return { check, post }
}

export class Egress extends Context.Service<Egress, ReturnType<typeof makeEgress>>()("grove/server/egress/Egress") {
  static readonly layer = Layer.effect(Egress, Effect.gen(function*() {
    const config = yield* ServerConfig
    const allow = config.egressAllow ?? []
    const parsed = parseAllowList(config.webhookAllow ?? [])
    // Config refused a bad entry already.
    const allowList = "invalid" in parsed ? EMPTY_ALLOW_LIST : parsed
    if (allowList.entries.length > 0) {
      yield* Effect.logInfo(`Webhooks may also reach these non-public networks and hosts (--webhook-allow): ${allowList.entries.join(", ")}`)
    }
    if (allow.length > 0) {
      yield* Effect.logWarning(
        `GROVE_UNSAFE_EGRESS_ALLOW is set: outbound calls may reach ${allow.join(", ")} although they are not public. For tests only; never in production.`
      )
    }
    return makeEgress({ allow, dnsServers: config.dnsServers ?? [], allowList })
  }))
}
