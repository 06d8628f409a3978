/**
 * Content: the content-addressed objects (chunks, blobs, trees) shared by the
 * repositories of one organization, and per repository its commits, branches
 * and the objects it references (for access checks and storage accounting).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A row exists once a chunk's bytes are stored and verified, in the ObjectStore under the organization's namespace:
  // an object of its own (`pack` null), or at `pack_offset` in a pack object holding small chunks that arrived together.
  // `referenced` turns true when a published commit first reaches the chunk: only then does it count against the quota.
  yield* sql`CREATE TABLE chunks (
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    hash text NOT NULL,
    size bigint NOT NULL,
    pack text,
    pack_offset bigint,
    referenced boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, hash)
  )`
  yield* sql`CREATE TABLE blobs (
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    hash text NOT NULL,
    size bigint NOT NULL,
    chunk_count integer NOT NULL,
    referenced boolean NOT NULL DEFAULT false,
    PRIMARY KEY (org_id, hash)
  )`
  // Immutable blob -> chunks mapping; a blob under the chunking threshold is one chunk with its own hash.
  yield* sql`CREATE TABLE blob_chunks (
    org_id uuid NOT NULL,
    blob_hash text NOT NULL,
    seq integer NOT NULL,
    chunk_hash text NOT NULL,
    byte_offset bigint NOT NULL,
    size bigint NOT NULL,
    PRIMARY KEY (org_id, blob_hash, seq),
    FOREIGN KEY (org_id, blob_hash) REFERENCES blobs (org_id, hash) ON DELETE CASCADE
  )`
  yield* sql`CREATE INDEX blob_chunks_chunk ON blob_chunks (org_id, chunk_hash)`
  // Trees are kept in their canonical text form, so what is stored is exactly what was hashed.
  yield* sql`CREATE TABLE trees (
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    hash text NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (org_id, hash)
  )`
  // Commits are written (unpublished) before the push command runs; the command publishes them as it moves the head.
  // `timestamp` is the exact RFC 3339 string that was hashed (timestamptz would lose nanoseconds).
  yield* sql`CREATE TABLE commits (
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    hash text NOT NULL,
    branch_name text NOT NULL,
    parent_hash text,
    merge_parent_hash text,
    manifest_hash text NOT NULL,
    author text NOT NULL,
    message text,
    timestamp text NOT NULL,
    files jsonb NOT NULL,
    published boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repo_id, hash)
  )`
  yield* sql`CREATE TABLE branches (
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    name text NOT NULL,
    description text,
    parent_branch text,
    status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed', 'merged')),
    close_reason text,
    head text,
    created_by text NOT NULL,
    -- RFC 3339 as the client sent it (the Oak client writes nanoseconds).
    created_at text NOT NULL,
    -- The first push that gave the branch commits (the branch.created event); null until then.
    pushed_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    version integer NOT NULL DEFAULT 1,
    PRIMARY KEY (repo_id, name)
  )`
  yield* sql`CREATE TABLE branch_reads (
    repo_id uuid NOT NULL,
    branch text NOT NULL,
    reader text NOT NULL,
    read_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repo_id, branch, reader),
    FOREIGN KEY (repo_id, branch) REFERENCES branches (repo_id, name) ON DELETE CASCADE ON UPDATE CASCADE
  )`
  // What a repository's published commits reach: content access is limited to these, and the size endpoint sums them.
  yield* sql`CREATE TABLE repo_trees (
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    tree_hash text NOT NULL,
    PRIMARY KEY (repo_id, tree_hash)
  )`
  yield* sql`CREATE TABLE repo_blobs (
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    blob_hash text NOT NULL,
    PRIMARY KEY (repo_id, blob_hash)
  )`
  // Pushes too large for one bus message leave their object lists here; the push command reads and deletes them.
  yield* sql`CREATE TABLE staged_pushes (
    id uuid PRIMARY KEY,
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    body jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`
  yield* sql`ALTER TABLE organizations ADD COLUMN used_bytes bigint NOT NULL DEFAULT 0`
})
