/**
 * The sync protocol's JSON endpoints (shared/spec/sync-protocol.md), by responsibility: pushes
 * (PushHandler: verified outside the entity, then one Branch command), reads of history (PullHandlers)
 * and blobs and chunks (ObjectHandlers). Binary chunk routes are in ChunkRoutes.
 */
import { ApiPullCompact, GroveApi } from "@grove/api"
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import * as Frames from "@grove/core/objects/Frames"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { objectHandlers } from "./ObjectHandlers.ts"
import { pullHandlers } from "./PullHandlers.ts"
import { pushHandlers } from "./PushHandler.ts"

export { checkHashList } from "./SyncWire.ts"

/**
 * Protocol flags, as the Oak client reads them. `staged_v1` with `opaque_v1` sessions, `v1` aborts
 * and `async_v1` mapping proofs: pushes past the ordinary limits go through `push/staged-v1`
 * (staged-push/). The phase-one fields stay for clients that look for them.
 */
export const CAPABILITIES = {
  push_protocol: "staged_v1",
  staged_capabilities_ready: true,
  staged_session_protocol: "opaque_v1",
  staged_abort_protocol: "v1",
  mapping_proof_protocol: "async_v1",
  known_loss_protocol: "report_v1",
  ordinary_bootstrap_protocol: "headless_preload_v1",
  chunk_batch_protocol: "bounded_v1",
  /** Grove's binary chunk download: POST chunks/fetch {hashes} answers length-framed chunks. */
  chunk_fetch_protocol: "frames_v1",
  /** zstd per chunk on the wire (only when it shrinks): taken in chunks/batch and PUT, given by chunks/fetch when asked. */
  chunk_compression: "zstd_v1",
  /** zstd request bodies (`Content-Encoding: zstd`: the JSON routes and chunks/batch) and answers (`Accept-Encoding: zstd`): http/ContentEncoding. */
  [BodyCompression.CAPABILITY]: BodyCompression.ZSTD_V1,
  /** Frames without the hash (the receiver hashes the bytes): chunks/batch with content type `application/vnd.grove.chunk-frames.bare-v1`, chunks/fetch with `frames: "bare_v1"` (core's Frames). */
  [Frames.CAPABILITY]: Frames.BARE_V1,
  /** `GET pull` with `Accept: application/vnd.grove.pull-compact-v1+json` answers without what the client rebuilds (api's PullCompact). */
  [ApiPullCompact.CAPABILITY]: ApiPullCompact.COMPACT_V1,
  max_chunk_upload_bytes: 64 * 1024 * 1024,
  max_batch_entries: 256
} as const

export const SyncHandlers = HttpApiBuilder.group(GroveApi, "sync", Effect.fn(function*(handlers) {
  return handlers.handleAll({
    capabilities: () => Effect.succeed(CAPABILITIES),
    ...(yield* pushHandlers),
    ...(yield* pullHandlers),
    ...(yield* objectHandlers)
  })
}))
