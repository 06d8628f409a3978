/**
 * Chunks: verified bytes in the ObjectStore under the organization's
 * namespace (the dedup boundary), with a `chunks` row once they are stored.
 * Nothing is stored under a hash its bytes do not have.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { ObjectStore } from "@grove/storage"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { zstdDecompressSync } from "node:zlib"

/** Bytes that do not hash to the hash they were sent under, or break a limit. */
export class ChunkRejected extends Schema.TaggedError<ChunkRejected>()("ChunkRejected", {
  hash: Schema.String,
  reason: Schema.String
}) {}

const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd] as const

const hasZstdMagic = (bytes: Uint8Array) => ZSTD_MAGIC.every((b, i) => bytes[i] === b)

/**
 * The plain bytes of a received chunk: zstd-compressed bytes whose decompression hashes to `hash`,
 * else the bytes themselves if they do. Undefined when neither matches.
 */
export const plainChunkBytes = (hash: string, received: Uint8Array, maxPlainBytes: number): Uint8Array | undefined => {
  if (hasZstdMagic(received)) {
    try {
      const plain = zstdDecompressSync(received, { maxOutputLength: maxPlainBytes })
      if (Blake3.hash(plain) === hash) return plain
    } catch {
      // Not valid zstd (or too large): the bytes may still be a raw chunk that happens to start with the magic.
    }
  }
  return Blake3.hash(received) === hash ? received : undefined
}

export const namespaceOf = (orgId: string) => orgId

export type ChunkStoreError = ObjectStore.ObjectStoreError | SqlError

export class ChunkStore extends Context.Service<ChunkStore, {
  /** Verifies and stores one received chunk (raw or zstd); a chunk the organization already has is not rewritten. */
  readonly put: (orgId: string, hash: string, received: Uint8Array) => Effect.Effect<{ readonly size: number }, ChunkRejected | ChunkStoreError>
  /** The hashes the organization does not have, in request order. */
  readonly missing: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /** Sizes of the chunks the organization has. */
  readonly sizes: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, number>, SqlError>
  readonly read: (orgId: string, hash: string) => Stream.Stream<Uint8Array, ObjectStore.ObjectStoreError | ObjectStore.ObjectNotFound>
  readonly readBytes: (orgId: string, hash: string) => Effect.Effect<Uint8Array, ObjectStore.ObjectStoreError | ObjectStore.ObjectNotFound>
}>()("grove/server/content/ChunkStore") {
  static readonly layer = Layer.effect(ChunkStore, Effect.gen(function*() {
    const store = yield* ObjectStore.ObjectStore
    const sql = yield* SqlClient.SqlClient

    const sizes = Effect.fnUntraced(function*(orgId: string, hashes: ReadonlyArray<string>) {
      if (hashes.length === 0) return new Map<string, number>()
      const rows = yield* sql<{ hash: string; size: string }>`SELECT hash, size::text AS size FROM chunks
        WHERE org_id = ${orgId} AND hash = ANY(${[...hashes]})`
      return new Map(rows.map((r) => [r.hash, Number(r.size)]))
    })

    const readBytes = (orgId: string, hash: string) =>
      Stream.runCollect(store.get({ namespace: namespaceOf(orgId), hash })).pipe(
        Effect.map((parts) => {
          const list = Array.from(parts)
          if (list.length === 1) return list[0]!
          return Buffer.concat(list)
        })
      )

    return ChunkStore.of({
      put: Effect.fnUntraced(function*(orgId, hash, received) {
        if (!Blake3.isHash(hash)) return yield* new ChunkRejected({ hash, reason: "a chunk hash must be 64 lowercase hex characters" })
        const plain = plainChunkBytes(hash, received, 64 * 1024 * 1024)
        if (plain === undefined) {
          return yield* new ChunkRejected({ hash, reason: `chunk ${hash}: the bytes do not hash to it (raw or zstd)` })
        }
        const known = yield* sizes(orgId, [hash])
        if (known.has(hash)) return { size: plain.length }
        // Bytes first, row second: a row always points at stored bytes.
        yield* store.put({ namespace: namespaceOf(orgId), hash }, Stream.make(plain))
        yield* sql`INSERT INTO chunks ${sql.insert({ org_id: orgId, hash, size: plain.length })} ON CONFLICT DO NOTHING`
        return { size: plain.length }
      }),
      missing: Effect.fnUntraced(function*(orgId, hashes) {
        const have = yield* sizes(orgId, hashes)
        return hashes.filter((h) => !have.has(h))
      }),
      sizes,
      read: (orgId, hash) => store.get({ namespace: namespaceOf(orgId), hash }),
      readBytes
    })
  }))
}
