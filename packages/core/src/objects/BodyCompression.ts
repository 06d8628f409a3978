/**
 * zstd on the wire for request and response bodies (the `body_compression: zstd_v1` capability): the
 * names both sides negotiate with, and the one compression both use (grove's requests,
 * packages/cli/src/sync/BodyCompression.ts; the server's answers, packages/server/src/http/ContentEncoding.ts).
 */
import { zlib } from "./Zlib.ts"

export const CAPABILITY = "body_compression"
export const ZSTD_V1 = "zstd_v1"

/**
 * A server decoding a zstd body refuses (413) one that, past `RATIO_FROM` plain bytes, is more than `MAX_RATIO` times
 * its compressed size (a bomb; honest JSON is ~7x): a sender of very compressible bodies keeps under it.
 */
export const RATIO_FROM = 4 * 1024 * 1024
export const MAX_RATIO = 64
/** Whether a server takes `plainBytes` sent as `compressedBytes` of zstd (the ratio rule above). */
export const withinRatio = (plainBytes: number, compressedBytes: number): boolean =>
  plainBytes <= RATIO_FROM || plainBytes <= compressedBytes * MAX_RATIO

/**
 * Level 3 with an 8 MiB window (RFC 9659's most for this coding) and a 1 Mi-entry hash table: a push names
 * each hash megabytes apart (its commit's file list, its blob entry, its tree), and level 1's small table
 * forgets them (a 5,000-file push: 2.7 MiB of JSON, 0.69 MiB at level 1, 0.37 MiB so, in ~15 ms).
 */
let bodyParams: { readonly params: Record<number, number> } | undefined
/** Made on first use: node:zlib's constants are read once it is loaded (see Zlib.ts). */
const params = () => {
  const { constants } = zlib()
  return bodyParams ??= {
    params: {
      [constants.ZSTD_c_compressionLevel]: 3,
      [constants.ZSTD_c_windowLog]: 23,
      [constants.ZSTD_c_hashLog]: 20
    }
  }
}

/** `bytes` zstd-compressed (off the main thread). */
export const compress = (bytes: Uint8Array): Promise<Uint8Array> =>
  new Promise((resolve, reject) =>
    zlib().zstdCompress(bytes, params(), (error, out) => error === null ? resolve(new Uint8Array(out.buffer, out.byteOffset, out.byteLength)) : reject(error))
  )
