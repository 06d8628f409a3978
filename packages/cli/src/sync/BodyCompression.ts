/**
 * zstd request bodies, when the server says it takes them (`body_compression: zstd_v1` in
 * `capabilities`; server side: packages/server/src/http/ContentEncoding.ts). A push names every
 * new blob and tree by its hex hash, several times over (the commit's file list, the blob entries,
 * the trees); zstd with a window that spans the whole body sends about a seventh of the JSON. The
 * binary download's hash lists (Download.ts) go the same way. The
 * capabilities are asked once per server and process, and only when a body is worth compressing, so
 * small commands make no extra request. No Effect here (the small push, SmallPush.ts, reads these settings before
 * the client loads); the typed client's request mapping is Client.ts's `compressRequest`. Every request to another machine also says `Accept-Encoding: zstd`: a
 * server that compresses large answers does (sync/HttpTransport.ts decodes them), any other ignores it.
 */
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import { sendBytes } from "./HttpSend.ts"

const { CAPABILITY, ZSTD_V1 } = BodyCompression
/** Smaller bodies travel plain: the frame header and the capabilities round trip cost more. */
export const COMPRESS_FROM = 16 * 1024
export const ACCEPT_ENCODING = "zstd, gzip, deflate"

const known = new Map<string, Promise<Readonly<Record<string, unknown>>>>()

/** The server's `capabilities`, asked once per server and process (no answer or an error: none). */
export const capabilitiesOf = (site: string, token: string | undefined): Promise<Readonly<Record<string, unknown>>> => {
  let answer = known.get(site)
  if (answer === undefined) {
    answer = sendBytes(`${site}/api/capabilities`, {
      method: "GET",
      headers: { "accept-encoding": ACCEPT_ENCODING, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) }
    })
      .then((response) =>
        response.status >= 200 && response.status < 300
          ? JSON.parse(new TextDecoder().decode(response.body)) as Record<string, unknown>
          : {}
      )
      .catch(() => ({}))
    known.set(site, answer)
  }
  return answer
}

/**
 * Asks the capabilities now, without waiting for the answer, when a body of at least `bytes` will be sent: the
 * answer is then at hand when that body goes (a push asks while its blobs upload, not after them, one round trip
 * fewer on the way). Never fails (`capabilitiesOf`).
 */
export const askCapabilitiesEarly = (site: string, token: string | undefined, bytes: number): void => {
  if (bytes >= COMPRESS_FROM && bodyCompressionEnabled()) void capabilitiesOf(site, token)
}

/** Whether the server at `site` takes zstd request bodies. */
export const serverTakesZstd = async (site: string, token: string | undefined): Promise<boolean> =>
  (await capabilitiesOf(site, token))[CAPABILITY] === ZSTD_V1

export const zstd = BodyCompression.compress

/**
 * A request body as it goes to `site`, when compressed: zstd when the body is large enough, the server takes it and
 * it comes out smaller; undefined when the body goes as it is. The typed client's requests (Client.ts
 * `compressRequest`) and the small push (SmallPush.ts) both decide here.
 */
export const squeezeBody = async (site: string, token: string | undefined, body: Uint8Array): Promise<Uint8Array | undefined> => {
  if (!bodyCompressionEnabled() || body.length < COMPRESS_FROM || !(await serverTakesZstd(site, token))) return undefined
  const compressed = await zstd(body).catch(() => undefined)
  return compressed === undefined || compressed.length >= body.length ? undefined : compressed
}

/** `GROVE_BODY_COMPRESSION=off` sends every body plain (to compare, or past a proxy that mangles it). */
export const bodyCompressionEnabled = () => process.env["GROVE_BODY_COMPRESSION"] !== "off"

type CompressionMode = "on" | "off" | "auto"

/** `GROVE_CHUNK_COMPRESSION=on|off`: compress transfers whatever the server's address (`auto`: by it). */
export const compressionMode = (): CompressionMode => {
  const value = process.env["GROVE_CHUNK_COMPRESSION"]
  return value === "on" || value === "off" ? value : "auto"
}

const isLoopback = (site: string): boolean => {
  const host = new URL(site).hostname
  return host === "localhost" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host)
}

/**
 * Downloads (chunks, and large JSON answers such as a pull's) are asked compressed unless the server is on this
 * machine: there the bytes cost nothing and the server's compressing does (a 2,000-file clone on loopback took ~60%
 * longer; zstd of a 5,000-file pull's 2.8 MB answer cost the server ~30 ms of its ~120). `GROVE_CHUNK_COMPRESSION=on|off`
 * decides instead.
 */
export const downloadCompression = (site: string): boolean => {
  const mode = compressionMode()
  return mode === "on" || (mode === "auto" && !isLoopback(site))
}
