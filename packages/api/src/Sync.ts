/**
 * Wire shapes of the content-addressed sync protocol (`/{owner}/{name}/push`, `pull`,
 * `commits/info`, `blobs/*`, `chunks/*`) and of the branch and content endpoints.
 * Field names and optionality follow the public Oak client (see
 * shared/spec/sync-protocol.md): optional fields are omitted when empty and
 * accepted when absent or null. Hash formats, names and limits are checked by
 * the server with `@grove/core`, so errors can say exactly what is wrong.
 */
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import * as CompactPull from "@grove/core/objects/CompactPull"
import * as Frames from "@grove/core/objects/Frames"
import { Schema } from "effect"
import * as F from "./Fields.ts"
import * as P from "./Params.ts"

/** A field the Oak client may send as null, omit, or set. */
const Maybe = <S extends Schema.Top>(schema: S) => Schema.optionalKey(Schema.NullOr(schema))

/**
 * Longest commit message or pushed description: far beyond any real one (git has no limit), so a
 * commit made elsewhere still pushes; the body limit bounds the request anyway.
 */
export const MAX_MESSAGE = 1_000_000
const Size = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
const BLOB_MODES = ["regular", "executable", "symlink"]
const BlobMode = F.Word("mode", BLOB_MODES)

// The wire objects twice: as a request carries them (every string field held to its rule here, so a NUL
// or a malformed value answers 400 at decoding and the document says what is accepted), and as the server
// answers them (plain strings: what is stored is sent back as it is).

/** A file change a push carries. */
export const PushFileChange = Schema.Struct({
  path: F.FilePath,
  change_type: F.Word("change_type", ["added", "modified", "deleted", "renamed"]),
  old_blob_hash: Maybe(P.Hash),
  new_blob_hash: Maybe(P.Hash),
  old_path: Maybe(F.FilePath),
  old_mode: Maybe(BlobMode),
  new_mode: Maybe(BlobMode)
})

export const FileChangeData = Schema.Struct({
  path: Schema.String,
  change_type: Schema.String,
  old_blob_hash: Maybe(Schema.String),
  new_blob_hash: Maybe(Schema.String),
  old_path: Maybe(Schema.String),
  old_mode: Maybe(Schema.String),
  new_mode: Maybe(Schema.String)
})
export type FileChangeData = typeof FileChangeData.Type

/** A file change in the wire shape: optional fields only when set, as the Oak client writes them. */
export const toFileChangeData = (change: {
  readonly path: string
  readonly change_type: string
  readonly old_blob_hash: string | null
  readonly new_blob_hash: string | null
  readonly old_path?: string | null | undefined
  readonly old_mode?: string | null | undefined
  readonly new_mode?: string | null | undefined
}): FileChangeData => ({
  path: change.path,
  change_type: change.change_type,
  old_blob_hash: change.old_blob_hash,
  new_blob_hash: change.new_blob_hash,
  ...(change.old_path == null ? {} : { old_path: change.old_path }),
  ...(change.old_mode == null ? {} : { old_mode: change.old_mode }),
  ...(change.new_mode == null ? {} : { new_mode: change.new_mode })
})

/** A commit a push carries; the server re-hashes it (the hash covers branch, parents, manifest, author, message, timestamp). */
export const PushCommit = Schema.Struct({
  hash: P.Hash,
  branch_name: F.NewBranchName,
  parent_hash: Maybe(P.Hash),
  merge_parent_hash: Maybe(P.Hash),
  manifest_hash: P.Hash,
  author: F.Line("author", 0, 1000),
  message: Maybe(F.Message("message", MAX_MESSAGE)),
  /** RFC 3339 as the client's chrono prints it; parsed (and hashed) by the server. */
  timestamp: F.Line("timestamp", 1, 64),
  files: Schema.Array(PushFileChange)
})

export const CommitData = Schema.Struct({
  hash: Schema.String,
  branch_name: Schema.String,
  parent_hash: Maybe(Schema.String),
  merge_parent_hash: Maybe(Schema.String),
  manifest_hash: Schema.String,
  author: Schema.String,
  message: Maybe(Schema.String),
  timestamp: Schema.String,
  files: Schema.Array(FileChangeData)
})
export type CommitData = typeof CommitData.Type

export const PushChunkRef = Schema.Struct({ hash: P.Hash, offset: Size, size: Size })
export const ChunkRefData = Schema.Struct({ hash: Schema.String, offset: Schema.Number, size: Schema.Number })
export type ChunkRefData = typeof ChunkRefData.Type

/**
 * Bytes as a JSON array of numbers (serde's `Vec<u8>`), checked here only for being an array: a
 * 12 MiB blob is 12 million elements, and a per-element schema check costs seconds each way. The
 * server checks every value when it reads the bytes (PushPreparation: 400 otherwise). The generator
 * renders a declaration as `{}`: OpenApiDocument writes the rule in (BYTE_ARRAY_JSON_SCHEMA).
 */
export const BYTE_ARRAY_JSON_SCHEMA = { type: "array", items: { type: "integer", minimum: 0, maximum: 255 } } as const
export const ByteArray = Schema.declare(
  (u: unknown): u is ReadonlyArray<number> => Array.isArray(u),
  { expected: "an array of byte values 0-255" }
)

/** A blob a push carries: `content` is the bytes; empty when the blob travels as chunks. */
export const PushBlob = Schema.Struct({
  hash: P.Hash,
  content: ByteArray,
  size: Size,
  chunks: Schema.optionalKey(Schema.Array(PushChunkRef)),
  /** A staged push's chunked blob names the blob proof that checked its chunk list (see StagedPushGroups). */
  mapping_proof_token: Maybe(F.OpaqueId)
})

export const BlobData = Schema.Struct({
  hash: Schema.String,
  content: ByteArray,
  size: Schema.Number,
  chunks: Schema.optionalKey(Schema.Array(ChunkRefData)),
  mapping_proof_token: Maybe(Schema.String)
})
export type BlobData = typeof BlobData.Type

export const PushTree = Schema.Struct({
  hash: P.Hash,
  entries: Schema.Array(Schema.Struct({
    name: F.EntryName,
    kind: F.Word("kind", ["tree", "blob"]),
    hash: P.Hash,
    mode: F.Word("mode", [...BLOB_MODES, "tree"])
  }))
})

export const TreeEntryData = Schema.Struct({
  name: Schema.String,
  kind: Schema.String,
  hash: Schema.String,
  mode: Schema.String
})
export const TreeData = Schema.Struct({ hash: Schema.String, entries: Schema.Array(TreeEntryData) })
export type TreeData = typeof TreeData.Type

export const BranchStatus = Schema.Literals(["open", "closed", "merged"])

/** The branch record a push carries: its name is one a request may create. */
export const PushBranch = Schema.Struct({
  name: F.NewBranchName,
  description: Maybe(F.Message("description", MAX_MESSAGE)),
  /** An existing branch's name (it may predate today's rule for new names). */
  parent_branch: Maybe(P.BranchName),
  status: F.Word("status", BranchStatus.literals),
  created_at: F.Timestamp("created_at"),
  close_reason: Maybe(F.Message("close_reason", MAX_MESSAGE))
})

/** The branch record a pull returns. */
export const BranchData = Schema.Struct({
  name: Schema.String,
  description: Maybe(Schema.String),
  parent_branch: Maybe(Schema.String),
  status: Schema.String,
  created_at: Schema.String,
  close_reason: Maybe(Schema.String)
})
export type BranchData = typeof BranchData.Type

export const PushRequest = Schema.Struct({
  expected_head: Maybe(P.Hash),
  expected_branch_head: Maybe(P.Hash),
  force: Schema.optionalKey(Schema.Boolean),
  branch: Maybe(PushBranch),
  commits: Schema.Array(PushCommit),
  blobs: Schema.Array(PushBlob),
  trees: Schema.optionalKey(Schema.Array(PushTree))
})
export type PushRequest = typeof PushRequest.Type

export const PushResponse = Schema.Struct({
  success: Schema.Boolean,
  new_head: Schema.NullOr(Schema.String),
  message: Schema.String
})
export type PushResponse = typeof PushResponse.Type

const DEPTH = /^[0-9]{0,15}$/

/** `?depth=` of a pull: the commits of history to send from the head; empty, absent or 0 for all of it. */
const PullDepth = P.make({
  check: (value) => DEPTH.test(value) ? { ok: true } : { ok: false, reason: "depth must be a non-negative integer" },
  description: "Commits of history to send from the head: decimal digits; empty, absent or 0 for the whole history.",
  pattern: DEPTH.source,
  minLength: 0,
  maxLength: 15,
  exact: true
})

export const PullQuery = {
  since: Schema.optionalKey(Schema.String),
  branch_name: Schema.optionalKey(Schema.String),
  force: Schema.optionalKey(Schema.String),
  since_rename_id: Schema.optionalKey(Schema.String),
  depth: Schema.optionalKey(PullDepth),
  /** A sparse pull: comma-separated path prefixes; every tree is sent, blobs only at covered paths. */
  paths: Schema.optionalKey(Schema.String),
  /** A clone's preflight pin (`integrity`): the pull answers 412 if the scope's heads moved since. */
  integrity_snapshot: Schema.optionalKey(Schema.String),
  /** The branch a clone selects (with its exact head, `expected_head`), pinned by the snapshot. */
  selected_branch: Schema.optionalKey(Schema.String),
  expected_head: Schema.optionalKey(Schema.String)
}

export const PullResponse = Schema.Struct({
  head: Schema.NullOr(Schema.String),
  branch: Schema.NullOr(BranchData),
  branches: Schema.Array(BranchData),
  commits: Schema.Array(CommitData),
  blobs: Schema.Array(BlobData),
  trees: Schema.Array(TreeData),
  restricted_blobs: Schema.optionalKey(Schema.Array(Schema.String))
})
export type PullResponse = typeof PullResponse.Type

/** Distinct hashes, at most `max` of them (the server says which one is wrong). */
export const HashList = (max: number) =>
  Schema.Array(P.Hash).check(
    Schema.isMaxLength(max),
    Schema.makeFilter((hashes: ReadonlyArray<string>) => new Set(hashes).size === hashes.length ? undefined : "hashes must be distinct", {
      expected: "distinct hashes",
      toJsonSchema: () => ({ uniqueItems: true })
    })
  )

/** `blobs/check` (at most 10,000) and `blobs/info` (at most 250,000). */
export const Hashes = Schema.Struct({ hashes: HashList(10_000) })
/**
 * `blobs/check`. `require_verified_receipts`: count only blobs whose every chunk was verified when
 * the blob was registered (always so here: every blob is re-hashed before it is registered).
 * `verify_content` (at most 32 hashes): re-read and re-hash every blob reported present.
 */
export const BlobCheckRequest = Schema.Struct({
  hashes: HashList(10_000),
  require_verified_receipts: Schema.optionalKey(Schema.Boolean),
  verify_content: Schema.optionalKey(Schema.Boolean)
})
export const BlobInfoRequest = Schema.Struct({ hashes: HashList(250_000) })

export const CommitInfoRequest = Schema.Struct({
  hashes: HashList(256),
  metadata_only: Schema.optionalKey(Schema.Boolean)
})
export const CommitInfoResponse = Schema.Struct({ commits: Schema.Array(CommitData), trees: Schema.Array(TreeData) })

export const BlobCheckResponse = Schema.Struct({
  missing: Schema.Array(Schema.String),
  /** The present blobs were re-read and re-hashed for this answer (`verify_content`). */
  verified_content: Schema.optionalKey(Schema.Boolean),
  /** The `require_verified_receipts` predicate was applied. */
  verified_receipts_required: Schema.optionalKey(Schema.Boolean)
})

export const BlobInfoResponse = Schema.Struct({
  blobs: Schema.Array(BlobData),
  restricted: Schema.optionalKey(Schema.Array(Schema.String))
})

/** The only chunk batch protocol (see Capabilities). */
const ChunkBatchProtocol = Maybe(Schema.Literal("bounded_v1"))

export const ChunkCheckRequest = Schema.Struct({
  hashes: HashList(10_000),
  /** One size per hash, when given. */
  sizes: Maybe(Schema.Array(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))),
  chunk_batch_protocol: ChunkBatchProtocol
})
export const ChunkCheckResponse = Schema.Struct({
  missing: Schema.Array(Schema.Struct({ hash: Schema.String, upload_url: Schema.NullOr(Schema.String) }))
})

export const ChunkDownloadRequest = Schema.Struct({
  hashes: HashList(10_000),
  chunk_batch_protocol: ChunkBatchProtocol
})
export const ChunkDownloadResponse = Schema.Struct({
  chunks: Schema.Array(Schema.Struct({
    hash: Schema.String,
    download_url: Schema.NullOr(Schema.String),
    content: Schema.optionalKey(ByteArray)
  })),
  /** A length-framed binary download of many chunks at once (see the server's chunk routes). */
  batch_url: Schema.optionalKey(Schema.String),
  restricted: Schema.optionalKey(Schema.Array(Schema.String))
})

export const ChunkUploadedRequest = Schema.Struct({
  hashes: Schema.Array(Schema.Struct({ hash: P.Hash, size: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)) })).check(Schema.isMaxLength(256))
})
export const Confirmation = Schema.Struct({ ok: Schema.Boolean })

const flag = (description: string) => Schema.optionalKey(Schema.String.annotate({ description }))

/**
 * Protocol flags; only implemented features are advertised. The known ones are described (the
 * server's SyncHandlers CAPABILITIES), each optional and typed loosely (a string, not its one
 * value) so a client can read a server of another version; any other flag is allowed.
 */
export const Capabilities = Schema.StructWithRest(Schema.Struct({
  push_protocol: flag("`staged_v1`: pushes past the ordinary limits go through push/staged-v1."),
  staged_capabilities_ready: Schema.optionalKey(Schema.Boolean),
  staged_session_protocol: flag("`opaque_v1`."),
  staged_abort_protocol: flag("`v1`."),
  mapping_proof_protocol: flag("`async_v1`."),
  known_loss_protocol: flag("`report_v1`."),
  ordinary_bootstrap_protocol: flag("`headless_preload_v1`."),
  chunk_batch_protocol: flag("`bounded_v1`: the only chunk batch protocol."),
  chunk_fetch_protocol: flag("`frames_v1`: POST chunks/fetch {hashes} answers length-framed chunks."),
  chunk_compression: flag("`zstd_v1`: zstd per chunk on the wire, when it shrinks."),
  [BodyCompression.CAPABILITY]: flag("`zstd_v1`: zstd request bodies (Content-Encoding) and answers (Accept-Encoding)."),
  [Frames.CAPABILITY]: flag("`bare_v1`: frames without the hash (the receiver hashes the bytes)."),
  [CompactPull.CAPABILITY]: flag("`compact_v1`: GET pull with Accept: application/vnd.grove.pull-compact-v1+json answers the compact form."),
  max_chunk_upload_bytes: Schema.optionalKey(Schema.Int),
  max_batch_entries: Schema.optionalKey(Schema.Int)
}), [Schema.Record(Schema.String, Schema.Unknown)])

// ---- Branch and content endpoints of the service interface ----

export const Branch = Schema.Struct({
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  parent_branch: Schema.NullOr(Schema.String),
  /** `open` or `closed`, as the Oak client knows them: a merged branch is closed. */
  status: BranchStatus,
  /** Grove's own state: `open`, `closed` or `merged`. */
  state: BranchStatus,
  head: Schema.NullOr(Schema.String),
  created_by: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  close_reason: Schema.optionalKey(Schema.String),
  /** With `record_read=1`: who else has read this branch, most recent first. */
  readers: Schema.optionalKey(Schema.Array(Schema.Struct({ name: Schema.String, read_at: Schema.String })))
})
export type Branch = typeof Branch.Type

/** `{branches: [...]}`, the shape the Oak client reads. */
export const BranchList = Schema.Struct({ branches: Schema.Array(Branch) })

export const CreateBranch = Schema.Struct({
  name: F.NewBranchName,
  description: Schema.optionalKey(F.Multiline("description", 10_000)),
  parent_branch: Schema.optionalKey(F.NewBranchName)
})

export const TreeListingEntry = Schema.Struct({
  name: Schema.String,
  path: Schema.String,
  kind: Schema.Literals(["tree", "blob"]),
  mode: Schema.String,
  hash: Schema.String,
  /** Bytes, for blobs. */
  size: Schema.optionalKey(Schema.Number)
})
export const TreeListing = Schema.Struct({
  commit: Schema.String,
  path: Schema.String,
  hash: Schema.String,
  entries: Schema.Array(TreeListingEntry)
})

export const OrgStorage = Schema.Struct({
  slug: Schema.String,
  used_bytes: Schema.Number,
  quota_bytes: Schema.Number
})
