/**
 * Git's smart HTTP transport, protocol v0, for clones and fetches of main. A client asking for
 * v2 (the `Git-Protocol` header) falls back to v0 when the advertisement is a v0 one.
 *
 *   GET  {repo}.git/info/refs?service=git-upload-pack -> advertiseRefs, ADVERTISEMENT_CONTENT_TYPE
 *   POST {repo}.git/git-upload-pack                  -> uploadPack, RESULT_CONTENT_TYPE
 *
 * Negotiation is the simplest correct one: no common objects are ever acknowledged (NAK), and
 * after `done` the client gets the full pack whatever it has. Only the advertised head may be
 * wanted. No shallow, filter or multi_ack capabilities are advertised, so clients send none.
 */
import * as fs from "node:fs"
import * as zlib from "node:zlib"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Effect, Schema, Stream } from "effect"
import { exportError } from "./ExportError.ts"
import type { ExportError } from "./ExportError.ts"

export const ADVERTISEMENT_CONTENT_TYPE = "application/x-git-upload-pack-advertisement"
export const RESULT_CONTENT_TYPE = "application/x-git-upload-pack-result"
export const REQUEST_CONTENT_TYPE = "application/x-git-upload-pack-request"

export const CAPABILITIES = ["side-band-64k", "side-band", "no-progress", "symref=HEAD:refs/heads/main", "agent=grove/1"]
const ZERO_ID = "0".repeat(40)

export class UploadPackRequestError extends Schema.TaggedError<UploadPackRequestError>()("UploadPackRequestError", {
  message: Schema.String
}) {}

const utf8 = new TextEncoder()
const FLUSH = utf8.encode("0000")

/** One pkt-line: four hex digits of length (including themselves), then the payload. */
export const pktLine = (payload: string | Uint8Array): Uint8Array => {
  const body = typeof payload === "string" ? utf8.encode(payload) : payload
  const out = new Uint8Array(body.length + 4)
  out.set(utf8.encode((body.length + 4).toString(16).padStart(4, "0")), 0)
  out.set(body, 4)
  return out
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => Buffer.concat(parts)

/** The `info/refs` body: main as HEAD and refs/heads/main, or capabilities only for an empty repository. */
export const advertiseRefs = (headSha: string | null): Uint8Array => {
  const caps = CAPABILITIES.join(" ")
  const refs = headSha === null
    ? [pktLine(`${ZERO_ID} capabilities^{}\0${caps}\n`)]
    : [pktLine(`${headSha} HEAD\0${caps}\n`), pktLine(`${headSha} refs/heads/main\n`)]
  return concat([pktLine("# service=git-upload-pack\n"), FLUSH, ...refs, FLUSH])
}

/** An `ERR` line, which git prints as "remote error: ..."; send it with status 200 and RESULT_CONTENT_TYPE. */
export const errorPacket = (message: string): Uint8Array => pktLine(`ERR ${message}\n`)

export interface UploadRequest {
  readonly wants: ReadonlyArray<string>
  readonly haves: ReadonlyArray<string>
  readonly capabilities: ReadonlyArray<string>
  readonly done: boolean
}

const badRequest = (message: string) => new UploadPackRequestError({ message })
const ID = /^[0-9a-f]{40}$/

/** Parses an upload-pack request body (gzip, as git sends large ones, is undone first). */
export const parseUploadRequest = (raw: Uint8Array): Effect.Effect<UploadRequest, UploadPackRequestError> =>
  Effect.gen(function*() {
    let body = raw
    if (body[0] === 0x1f && body[1] === 0x8b) {
      body = yield* Effect.try({ try: () => zlib.gunzipSync(raw), catch: () => badRequest("corrupt gzip body") })
    }
    const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    const wants: Array<string> = []
    const haves: Array<string> = []
    let capabilities: Array<string> = []
    let done = false
    let at = 0
    while (at < text.length) {
      const length = Number.parseInt(text.toString("latin1", at, at + 4), 16)
      if (!/^[0-9a-f]{4}$/.test(text.toString("latin1", at, at + 4)) || (length > 0 && length < 4) || at + Math.max(length, 4) > text.length) {
        return yield* badRequest(`malformed pkt-line at byte ${at}`)
      }
      if (length === 0) {
        at += 4
        continue
      }
      const line = text.toString("utf8", at + 4, at + length).replace(/\n$/, "")
      at += length
      const [command, id, ...rest] = line.split(" ")
      if (command === "want" && id !== undefined && ID.test(id)) {
        if (wants.length === 0) capabilities = rest
        wants.push(id)
      } else if (command === "have" && id !== undefined && ID.test(id)) {
        haves.push(id)
      } else if (line === "done") {
        done = true
      } else {
        return yield* badRequest(`unsupported request line '${line.slice(0, 80)}'`)
      }
    }
    return { wants, haves, capabilities, done }
  })

/** The pack to send: a file (what PackCache holds) or any byte stream. */
export type PackData = { readonly path: string } | { readonly stream: Stream.Stream<Uint8Array, ExportError> }

// Payload of one side-band packet: 65520 (side-band-64k) or 1000 (side-band) minus length and band byte.
const sideBandPayload = (capabilities: ReadonlyArray<string>): number | undefined =>
  capabilities.includes("side-band-64k") ? 65515 : capabilities.includes("side-band") ? 995 : undefined

const packStream = (pack: PackData, readSize: number): Stream.Stream<Uint8Array, ExportError> =>
  "path" in pack
    ? NodeStream.fromReadable({
      evaluate: () => fs.createReadStream(pack.path, { highWaterMark: readSize }),
      onError: exportError(`reading pack ${pack.path} failed`)
    })
    : pack.stream

/** Frames data as band-1 packets no larger than the negotiated side-band size. */
const sideBand = (stream: Stream.Stream<Uint8Array, ExportError>, payload: number) =>
  stream.pipe(
    Stream.flatMap((chunk) => {
      const packets: Array<Uint8Array> = []
      for (let at = 0; at < chunk.length; at += payload) {
        const part = chunk.subarray(at, Math.min(at + payload, chunk.length))
        const packet = new Uint8Array(part.length + 1)
        packet[0] = 1
        packet.set(part, 1)
        packets.push(pktLine(packet))
      }
      return Stream.fromIterable(packets)
    }),
    Stream.concat(Stream.succeed(FLUSH))
  )

/**
 * The `git-upload-pack` response for `requestBody`, given main's head and its pack. Wants other
 * than the head fail with UploadPackRequestError (answer 400, or 200 with errorPacket).
 */
export const uploadPack = (
  requestBody: Uint8Array,
  headSha: string | null,
  pack: PackData
): Effect.Effect<Stream.Stream<Uint8Array, ExportError>, UploadPackRequestError> =>
  Effect.gen(function*() {
    const request = yield* parseUploadRequest(requestBody)
    // A request without wants (the client found nothing to fetch) gets an empty answer, as git's own server gives.
    if (request.wants.length === 0) return Stream.empty
    for (const want of request.wants) {
      if (want !== headSha) return yield* badRequest(`not our ref ${want}`)
    }
    const nak = Stream.succeed(pktLine("NAK\n"))
    // Stateless negotiation round without `done`: NAK and let the client send more haves or `done`.
    if (!request.done) return nak
    const payload = sideBandPayload(request.capabilities)
    const data = packStream(pack, payload ?? 65536)
    return Stream.concat(nak, payload === undefined ? data : sideBand(data, payload))
  })
