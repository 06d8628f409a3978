/**
 * Capability links for chunk downloads, as the Oak client follows them: `chunks/download` answers
 * each chunk the caller may read with a `download_url` (`GET …/chunks/fetch/{hash}?t=…`) and a
 * `batch_url` (`POST …/chunks/fetch` with `{hashes, tokens}`), which the client requests without
 * its key, like presigned object-store URLs. A token grants one chunk of one repository until it
 * expires: `<expiry, unix seconds>.<HMAC of repository id, hash and expiry under the server key>`,
 * so any node verifies it, and a link handed to someone else opens that one chunk only.
 */
import { Context, Effect, Layer } from "effect"
import { timingSafeEqual } from "node:crypto"
import { SecretBox } from "../ci/CiSecrets.ts"

/** How long a link works: long enough for a large clone's downloads, short enough not to matter if it leaks. */
export const LINK_TTL_SECONDS = 3600

const TOKEN = /^([0-9]{1,12})\.([0-9a-f]{64})$/

const HOST = /^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?$/

/**
 * Where the client reached this server (links must be absolute): the host a proxy says it was asked
 * for (`X-Forwarded-Host`, its first value), else the `Host` header, if it is a plain host[:port];
 * else the site URL. The scheme is `https` when `X-Forwarded-Proto` says so, else the site URL's.
 * A forged header only misleads the caller who sent it: the links go back to that caller alone.
 */
export const requestOrigin = (headers: Readonly<Record<string, string | undefined>>, siteUrl: string): string => {
  const forwarded = headers["x-forwarded-host"]?.split(",")[0]?.trim()
  const host = forwarded !== undefined && HOST.test(forwarded) ? forwarded : headers["host"] ?? ""
  if (!HOST.test(host)) return siteUrl
  const proto = headers["x-forwarded-proto"]?.split(",")[0]?.trim()
  return `${proto === "https" ? "https" : new URL(siteUrl).protocol.replace(":", "")}://${host}`
}

export class ChunkLinks extends Context.Service<ChunkLinks, {
  /** A token for `hash` in repository `repoId`, valid for LINK_TTL_SECONDS from `now` (ms). */
  readonly token: (repoId: string, hash: string, now?: number) => string
  /** Whether `token` grants `hash` in `repoId` at `now` (ms). */
  readonly check: (repoId: string, hash: string, token: string, now?: number) => boolean
}>()("grove/server/content/ChunkLinks") {
  static readonly layer = Layer.effect(ChunkLinks, Effect.gen(function*() {
    const box = yield* SecretBox
    const mac = (repoId: string, hash: string, expires: number) => box.sign("chunk-link", `${repoId}\n${hash}\n${expires}`)
    return ChunkLinks.of({
      token: (repoId, hash, now = Date.now()) => {
        const expires = Math.floor(now / 1000) + LINK_TTL_SECONDS
        return `${expires}.${mac(repoId, hash, expires)}`
      },
      check: (repoId, hash, token, now = Date.now()) => {
        const parsed = TOKEN.exec(token)
        if (parsed === null) return false
        const expires = Number(parsed[1])
        if (expires * 1000 < now) return false
        return timingSafeEqual(Buffer.from(parsed[2]!, "hex"), Buffer.from(mac(repoId, hash, expires), "hex"))
      }
    })
  }))
}
