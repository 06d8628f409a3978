/**
 * Streaming zip of one snapshot: each file is a local header, its (deflated or stored) bytes and
 * a data descriptor, so nothing is buffered beyond a read chunk; the central directory, kept as a
 * small record per entry, follows at the end. Zip64 records appear when an entry, an offset or the
 * entry count passes the classic limits. Output is deterministic: entries in name order and one
 * fixed timestamp (the commit time).
 *
 * Defence in depth: whatever the store holds (trees stored before the stricter name rule, or a bad
 * row), an entry whose name a checkout cannot write safely (`..`, a backslash as in `..\\evil.bat` or
 * `C:\\x`, `.git` in any spelling, `/`, control characters, over 255 bytes) is left out with
 * everything under it, so the archive never holds an absolute or climbing name.
 */
import * as zlib from "node:zlib"
import { Effect, Stream } from "effect"
import { parseTimestamp } from "@grove/core/objects/Timestamp"
import { checkEntryName, sortEntries } from "@grove/core/objects/Tree"
import type { TreeEntry } from "@grove/core/objects/Tree"
import { checkedSize, coalesce, deflate, DEFLATE_LEVEL, deflateSmall, readSmall, SMALL_BLOB, withFirstChunk, worthDeflating } from "./ByteStreams.ts"
import type { ExportError } from "./ExportError.ts"
import type { SnapshotSource } from "./SnapshotSource.ts"

export interface ZipOptions {
  /** RFC 3339 time stamped on every entry (use the commit's); default 1980-01-01T00:00:00Z. */
  readonly modified?: string
  /** Zip64 records for every entry, to exercise them without 4 GiB of data. */
  readonly forceZip64?: boolean
}

const U16 = 0xffff
const U32 = 0xffffffff
// Sizes past this use Zip64; the margin covers deflate's worst-case growth (5 bytes per 16 KiB block).
const ZIP64_ENTRY_SIZE = 0xff000000
const METHOD_STORE = 0
const METHOD_DEFLATE = 8
// Bit 3: sizes and CRC follow the data; bit 11: names are UTF-8.
const FLAGS = 0x0008 | 0x0800
const MADE_BY_UNIX = 3 << 8

const MODE_REGULAR = 0o100644
const MODE_EXECUTABLE = 0o100755
const MODE_SYMLINK = 0o120777
const MODE_DIRECTORY = 0o40755
const MSDOS_DIRECTORY = 0x10

const utf8 = new TextEncoder()

interface CentralRecord {
  readonly name: Uint8Array
  readonly method: number
  readonly attributes: number
  readonly offset: number
  readonly zip64: boolean
  crc: number
  compressedSize: number
  size: number
}

class Writer {
  offset = 0
  readonly records: Array<CentralRecord> = []
  readonly dosTime: number
  readonly dosDate: number
  readonly unixTime: number
  readonly forceZip64: boolean

  constructor(options: ZipOptions) {
    const ns = options.modified === undefined ? undefined : parseTimestamp(options.modified)
    const date = new Date(ns === undefined ? Date.UTC(1980, 0, 1) : Number(ns / 1_000_000n))
    const year = Math.min(Math.max(date.getUTCFullYear(), 1980), 2107)
    const clamped = year !== date.getUTCFullYear()
    this.dosDate = clamped ? ((year - 1980) << 9) | (1 << 5) | 1 : ((year - 1980) << 9) | ((date.getUTCMonth() + 1) << 5) | date.getUTCDate()
    this.dosTime = clamped ? 0 : (date.getUTCHours() << 11) | (date.getUTCMinutes() << 5) | (date.getUTCSeconds() >> 1)
    this.unixTime = Math.min(Math.max(Math.floor(date.getTime() / 1000), 0), U32)
    this.forceZip64 = options.forceZip64 ?? false
  }

  /** Passes bytes through, advancing the archive offset. */
  readonly count = (chunk: Uint8Array): Uint8Array => {
    this.offset += chunk.length
    return chunk
  }

  /** Starts an entry at the current offset; its CRC and sizes are filled in as its data passes. */
  begin(path: string, method: number, mode: number, size: number): { record: CentralRecord; header: Uint8Array } {
    // Names come from checked segments; this is the last line, should a caller ever pass something else.
    if (!isSafeZipPath(path)) throw new Error(`refusing to write the zip entry ${JSON.stringify(path.slice(0, 200))}`)
    const name = utf8.encode(path)
    const zip64 = this.forceZip64 || size >= ZIP64_ENTRY_SIZE
    const attributes = ((mode << 16) | (mode === MODE_DIRECTORY ? MSDOS_DIRECTORY : 0)) >>> 0
    const record: CentralRecord = { name, method, attributes, offset: this.offset, zip64, crc: 0, compressedSize: 0, size: 0 }
    this.records.push(record)
    const extra = zip64 ? [zip64Extra([0, 0]), this.timeExtra()] : [this.timeExtra()]
    const extraLength = extra.reduce((n, e) => n + e.length, 0)
    const b = new Bytes(30 + name.length + extraLength)
    b.u32(0x04034b50).u16(zip64 ? 45 : 20).u16(FLAGS).u16(method).u16(this.dosTime).u16(this.dosDate)
    b.u32(0).u32(zip64 ? U32 : 0).u32(zip64 ? U32 : 0).u16(name.length).u16(extraLength).bytes(name)
    for (const e of extra) b.bytes(e)
    return { record, header: b.done() }
  }

  descriptor(record: CentralRecord): Uint8Array {
    const b = new Bytes(record.zip64 ? 24 : 16)
    b.u32(0x08074b50).u32(record.crc)
    if (record.zip64) b.u64(record.compressedSize).u64(record.size)
    else b.u32(record.compressedSize).u32(record.size)
    return b.done()
  }

  timeExtra(): Uint8Array {
    // "UT" extended timestamp: mtime in UTC seconds, which unzip prefers over the local-time DOS stamp.
    return new Bytes(9).u16(0x5455).u16(5).u8(1).u32(this.unixTime).done()
  }

  centralDirectory(): Uint8Array {
    const parts: Array<Uint8Array> = []
    const start = this.offset
    for (const r of this.records) {
      const big = [
        r.zip64 || r.size >= U32 ? r.size : undefined,
        r.zip64 || r.compressedSize >= U32 ? r.compressedSize : undefined,
        r.zip64 || r.offset >= U32 ? r.offset : undefined
      ]
      const wide = big.filter((v): v is number => v !== undefined)
      const extra = wide.length > 0 ? [zip64Extra(wide), this.timeExtra()] : [this.timeExtra()]
      const extraLength = extra.reduce((n, e) => n + e.length, 0)
      const b = new Bytes(46 + r.name.length + extraLength)
      b.u32(0x02014b50).u16(MADE_BY_UNIX | (r.zip64 ? 45 : 20)).u16(r.zip64 ? 45 : 20).u16(FLAGS).u16(r.method)
      b.u16(this.dosTime).u16(this.dosDate).u32(r.crc)
      b.u32(big[1] === undefined ? r.compressedSize : U32).u32(big[0] === undefined ? r.size : U32)
      b.u16(r.name.length).u16(extraLength).u16(0).u16(0).u16(0).u32(r.attributes)
      b.u32(big[2] === undefined ? r.offset : U32).bytes(r.name)
      for (const e of extra) b.bytes(e)
      parts.push(b.done())
    }
    const size = parts.reduce((n, p) => n + p.length, 0)
    const count = this.records.length
    const needs64 = this.forceZip64 || count >= U16 || start >= U32 || size >= U32
    if (needs64) {
      const record64 = start + size
      parts.push(
        new Bytes(56).u32(0x06064b50).u64(44).u16(MADE_BY_UNIX | 45).u16(45).u32(0).u32(0)
          .u64(count).u64(count).u64(size).u64(start).done(),
        new Bytes(20).u32(0x07064b50).u32(0).u64(record64).u32(1).done()
      )
    }
    parts.push(
      new Bytes(22).u32(0x06054b50).u16(0).u16(0).u16(Math.min(count, U16)).u16(Math.min(count, U16))
        .u32(needs64 ? U32 : size).u32(needs64 ? U32 : start).u16(0).done()
    )
    return concatBytes(parts)
  }
}

const zip64Extra = (values: ReadonlyArray<number>): Uint8Array => {
  const b = new Bytes(4 + 8 * values.length).u16(0x0001).u16(8 * values.length)
  for (const v of values) b.u64(v)
  return b.done()
}

/** Little-endian field writer for the fixed-size records. */
class Bytes {
  private readonly buffer: Uint8Array
  private readonly view: DataView
  private at = 0
  constructor(size: number) {
    this.buffer = new Uint8Array(size)
    this.view = new DataView(this.buffer.buffer)
  }
  u8(v: number): this {
    this.view.setUint8(this.at, v)
    this.at += 1
    return this
  }
  u16(v: number): this {
    this.view.setUint16(this.at, v, true)
    this.at += 2
    return this
  }
  u32(v: number): this {
    this.view.setUint32(this.at, v >>> 0, true)
    this.at += 4
    return this
  }
  u64(v: number): this {
    this.view.setBigUint64(this.at, BigInt(v), true)
    this.at += 8
    return this
  }
  bytes(v: Uint8Array): this {
    this.buffer.set(v, this.at)
    this.at += v.length
    return this
  }
  done(): Uint8Array {
    return this.buffer
  }
}

const concatBytes = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** A relative path of safe names (a directory's ends with `/`): never absolute, never climbing, no backslash or drive. */
export const isSafeZipPath = (path: string): boolean => {
  const segments = (path.endsWith("/") ? path.slice(0, -1) : path).split("/")
  return segments.every((segment) => checkEntryName(segment).ok)
}

const fileMode = (entry: TreeEntry): number =>
  entry.mode === "executable" ? MODE_EXECUTABLE : entry.mode === "symlink" ? MODE_SYMLINK : MODE_REGULAR

// A small file is read whole and deflated in one call; a zlib stream per small file costs more than the file.
const smallFileEntry = <E>(source: SnapshotSource<E>, w: Writer, entry: TreeEntry, path: string, size: number) =>
  Stream.unwrap(
    Effect.map(readSmall(source.readBlob(entry.hash), size, `blob ${entry.hash} (${path})`), (bytes) => {
      const packed = deflateSmall(bytes, true)
      const { record, header } = w.begin(path, packed === undefined ? METHOD_STORE : METHOD_DEFLATE, fileMode(entry), size)
      record.crc = zlib.crc32(bytes)
      record.size = size
      record.compressedSize = packed?.length ?? size
      return Stream.make(header, packed ?? bytes, w.descriptor(record))
    })
  )

const fileEntry = <E>(source: SnapshotSource<E>, w: Writer, entry: TreeEntry, path: string) =>
  Stream.unwrap(
    Effect.map(source.blobSize(entry.hash), (size) =>
      size <= SMALL_BLOB ? smallFileEntry(source, w, entry, path, size) : withFirstChunk(source.readBlob(entry.hash), (first, whole) =>
        Stream.suspend(() => {
          const method = worthDeflating(first) ? METHOD_DEFLATE : METHOD_STORE
          const { record, header } = w.begin(path, method, fileMode(entry), size)
          const plain = checkedSize(whole, size, (chunk) => {
            record.crc = zlib.crc32(chunk, record.crc)
            record.size += chunk.length
          }, `blob ${entry.hash} (${path})`)
          const data = method === METHOD_DEFLATE ? deflate(plain, { raw: true, level: DEFLATE_LEVEL }) : plain
          return Stream.succeed(header).pipe(
            Stream.concat(data.pipe(Stream.map((chunk) => {
              record.compressedSize += chunk.length
              return chunk
            }))),
            Stream.concat(Stream.sync(() => w.descriptor(record)))
          )
        })
      )
    )
  ).pipe(Stream.map(w.count))

// Directories are implied by file paths; only an empty one gets an entry of its own.
const emptyDirectory = (w: Writer, path: string): Stream.Stream<Uint8Array> =>
  Stream.suspend(() => {
    const { record, header } = w.begin(path, METHOD_STORE, MODE_DIRECTORY, 0)
    return Stream.make(header, w.descriptor(record))
  }).pipe(Stream.map(w.count))

const walk = <E>(source: SnapshotSource<E>, w: Writer, tree: string, prefix: string): Stream.Stream<Uint8Array, E | ExportError> =>
  Stream.unwrap(
    Effect.map(source.readTree(tree), (entries) =>
      entries.length === 0 && prefix !== ""
        ? emptyDirectory(w, prefix)
        : Stream.fromIterable(sortEntries(entries.filter((entry) => checkEntryName(entry.name).ok))).pipe(
          Stream.flatMap((entry) =>
            entry.kind === "tree"
              ? walk(source, w, entry.hash, `${prefix}${entry.name}/`)
              : fileEntry(source, w, entry, `${prefix}${entry.name}`)
          )
        )
    )
  )

/** The snapshot under `rootTree` as a zip archive, streamed. */
export const zipSnapshot = <E>(
  source: SnapshotSource<E>,
  rootTree: string,
  options: ZipOptions = {}
): Stream.Stream<Uint8Array, E | ExportError> =>
  Stream.suspend(() => {
    const w = new Writer(options)
    return walk(source, w, rootTree, "").pipe(
      Stream.concat(Stream.sync(() => w.centralDirectory())),
      coalesce(64 * 1024)
    )
  })

export const ZIP_CONTENT_TYPE = "application/zip"
