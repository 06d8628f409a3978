/**
 * A clone's first chunks/fetch requests, sent before its download is ready to take their answers (Download.ts).
 */
import { Objects } from "@grove/core"
import type { IncomingBlob } from "./Download.ts"
import { batchesOf, FETCH_ROUTE, fetchRequest, IN_FLIGHT, plan } from "./Download.ts"
import type { Answer, BodyConsumer } from "./HttpSend.ts"
import type { BinaryInit, RemoteRepo, StreamedInit } from "./RemoteRepo.ts"

const { Frames } = Objects
/** What an early request's answer may bring before the download takes it (then it pauses): see `fetchEarly`. */
const EARLY_HOLD = 1024 * 1024

/** What a batch's download hands to its request: how to take the answer, ask the rest again, and stop. */
export interface FetchHooks {
  readonly signal: AbortSignal
  readonly resume: () => Promise<BinaryInit | undefined>
  readonly stream: NonNullable<StreamedInit["stream"]>
}

/**
 * The first batches' chunks/fetch requests, sent before the download is ready to take their answers (a clone sends
 * them as soon as it knows its files, while it makes the checkout): the server reads the chunks meanwhile. An answer's
 * first EARLY_HOLD bytes are kept as they arrive, then it pauses (so the server waits too), until `downloadBlobs` takes
 * the request of the same batch and is handed them; nothing of it is verified or written before. Requests not taken
 * are stopped by `cancel` (and by `downloadBlobs` once done).
 */
export interface EarlyFetch {
  /** The head's files and the blobs of them to download, as given (`downloadBlobs` of this very list reuses the batches). */
  readonly snapshot: unknown
  readonly wanted: ReadonlyArray<IncomingBlob>
  readonly blobs: ReadonlyArray<IncomingBlob>
  readonly batches: ReadonlyArray<ReadonlyArray<string>>
  /** The request of a batch of exactly these hashes, once. */
  readonly claim: (hashes: ReadonlyArray<string>) => ((hooks: FetchHooks) => Promise<Answer>) | undefined
  readonly cancel: () => void
}

/**
 * Sends the first batches of a download of `wanted` (as `downloadBlobs` would batch the same list) and answers them
 * held; undefined when a blob's chunk list is not known yet (`blobs/info` would be asked first).
 */
export const fetchEarly = (remote: RemoteRepo, snapshot: unknown, wanted: ReadonlyArray<IncomingBlob>): EarlyFetch | undefined => {
  const { blobs, chunkSizes } = plan(wanted)
  if (chunkSizes === undefined) return undefined
  const batches = batchesOf(chunkSizes)
  const held = new Map<ReadonlyArray<string>, { readonly take: (hooks: FetchHooks) => Promise<Answer>; readonly controller: AbortController }>()
  for (const batch of batches.slice(0, IN_FLIGHT)) {
    const controller = new AbortController()
    let hooks: FetchHooks | undefined
    let attach!: (hooks: FetchHooks) => void
    const attached = new Promise<FetchHooks>((resolve) => (attach = resolve))
    /** The parts the last try's answer brought before the download took it, handed over in order once it does. */
    let handedOver: Promise<void> = Promise.resolve()
    const send = (init: BinaryInit) =>
      remote.sendBinary(FETCH_ROUTE, {
        ...init,
        signal: controller.signal,
        // After a break: once what came before it is handed over, the download asks for the rest.
        resume: async () => {
          const taker = hooks ?? await attached
          await handedOver
          return taker.resume()
        },
        stream: (status, headers) => {
          // Taken whole (hashed frames) once claimed, as downloadBlobs does.
          if (headers[Frames.HEADER] !== Frames.BARE_V1) return undefined
          /** The download's consumer, once every part kept before it is handed over (parts go straight to it then). */
          let live: BodyConsumer | undefined
          const kept: Array<Buffer> = []
          let keptBytes = 0
          let ended = false
          handedOver = attached.then(async (taker) => {
            const consumer = taker.stream(status, headers)
            if (consumer === undefined) throw new Error("the chunk answer was not taken")
            // In order, parts that arrive meanwhile too.
            for (let part = kept.shift(); part !== undefined; part = kept.shift()) await consumer.part(part)
            live = consumer
            if (ended) consumer.done()
          })
          // A failure shows where it is awaited (the answer, a resumed try, or the download's take).
          handedOver.catch(() => {})
          const whenTaken = handedOver
          return {
            // Kept until the download takes the answer; past EARLY_HOLD bytes the answer pauses (the server waits).
            part: (part) => {
              if (live !== undefined) return live.part(part)
              // A copy: the part may be a view of a buffer the socket reads into again (StreamSocket.ts).
              kept.push(Buffer.from(part))
              keptBytes += part.length
              return keptBytes >= EARLY_HOLD ? whenTaken : undefined
            },
            done: () => {
              if (live !== undefined) live.done()
              else ended = true
            }
          }
        }
      })
    // Sent now when it can be (a plain hash list): before the caller goes on to check the pull answer.
    const request = fetchRequest(remote, batch)
    const answer = request instanceof Promise ? request.then(send) : send(request)
    // Never claimed: stopped, and its failure is nobody's.
    answer.catch(() => {})
    const take = (taker: FetchHooks) => {
      hooks = taker
      if (taker.signal.aborted) controller.abort()
      else taker.signal.addEventListener("abort", () => controller.abort(), { once: true })
      attach(taker)
      // An answer that ended before it was taken is the download's once its parts are handed over.
      return answer.then(async (taken) => {
        await handedOver
        return taken
      })
    }
    held.set(batch, { take, controller })
  }
  return {
    snapshot,
    wanted,
    blobs,
    batches,
    claim: (hashes) => {
      for (const [batch, { take }] of held) {
        if (batch !== hashes && (batch.length !== hashes.length || batch.some((hash, i) => hash !== hashes[i]))) continue
        held.delete(batch)
        return take
      }
      return undefined
    },
    cancel: () => {
      for (const [batch, { controller }] of held) {
        held.delete(batch)
        controller.abort()
      }
    }
  }
}
