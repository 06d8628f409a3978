/** What the sync protocol's endpoints share: hash lists no schema checks, the wire form of a blob, a readable repository. */
import { ApiErrors, type ApiSync, CurrentCaller } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect } from "effect"
import type { Authorizer } from "../access/Authorizer.ts"
import { dbUnavailable } from "../http/Failures.ts"

/**
 * A list of distinct, well-formed hashes of bounded length, or a 400 saying what is wrong. The JSON
 * endpoints' hash lists are checked by their schema (`ApiSync.HashList`); this is for the lists no
 * schema decodes (the binary chunk fetch, the entries of `chunks/uploaded`).
 */
export const checkHashList = (hashes: ReadonlyArray<string>, max: number, what = "hashes") => {
  if (hashes.length > max) {
    return Effect.fail(new ApiErrors.BadRequest({ error: `at most ${max} ${what} per request`, code: "too_many" }))
  }
  const seen = new Set<string>()
  for (const h of hashes) {
    if (!Blake3.isHash(h)) {
      return Effect.fail(new ApiErrors.BadRequest({ error: `'${String(h).slice(0, 80)}' is not a hash: 64 lowercase hex characters`, code: "invalid_hash" }))
    }
    if (seen.has(h)) return Effect.fail(new ApiErrors.BadRequest({ error: `${h} is listed twice`, code: "duplicate_hash" }))
    seen.add(h)
  }
  return Effect.void
}

/**
 * A blob as the wire carries it on pull and blobs/info: chunk references, no content. The empty blob
 * goes out with no chunks, its shape in the Oak client (which never uploads it as a chunk): with a
 * zero-byte chunk listed, a mount kept that reference without the chunk and refused to push it.
 */
export const toBlobData = (b: { hash: string; size: number; chunks: ReadonlyArray<ApiSync.ChunkRefData> }): ApiSync.BlobData => ({
  hash: b.hash,
  content: [],
  size: b.size,
  chunks: b.size === 0 ? [] : b.chunks
})

/** The repository `owner/name` if the caller may read it (else the authorizer's refusal). */
export const readableRepository = (authorizer: Authorizer["Service"]) => (owner: string, name: string) =>
  Effect.gen(function*() {
    const caller = yield* CurrentCaller
    return yield* dbUnavailable(authorizer.repository(caller, owner, name, "read"))
  })
