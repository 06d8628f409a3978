/**
 * Staged pushes (the Oak client's staged_v1) and blob mapping proofs (async_v1).
 *
 * A stage is one logical push sent in several requests: it owns the commits, trees and blobs its
 * batches admitted (stored, unpublished, unreferenced) until one Branch command publishes them with
 * the head's compare-and-set. Aborted, completed and expired stages keep only their row (a
 * tombstone, so a replayed finalizer or abort still gets its answer) until it is collected.
 *
 * A blob proof checks a large blob's chunk list before any batch names it: the client declares
 * each blob's size, chunk count and mapping digest, uploads the list in pages, then the server
 * re-hashes the chunks and, when they make the blob, registers it for the caller.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE push_stages (
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    stage_id text NOT NULL,
    principal text NOT NULL,
    branch text NOT NULL,
    branch_identity text NOT NULL,
    expected_head text,
    force boolean NOT NULL,
    state text NOT NULL CHECK (state IN ('active', 'completed', 'aborted')),
    completed_target text,
    commit_count integer NOT NULL DEFAULT 0,
    version bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (repo_id, stage_id)
  )`
  yield* sql`CREATE INDEX push_stages_expiry ON push_stages (expires_at)`
  yield* sql`CREATE TABLE push_stage_objects (
    repo_id uuid NOT NULL,
    stage_id text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('commit', 'tree', 'blob')),
    hash text NOT NULL,
    PRIMARY KEY (repo_id, stage_id, kind, hash),
    FOREIGN KEY (repo_id, stage_id) REFERENCES push_stages (repo_id, stage_id) ON DELETE CASCADE
  )`
  yield* sql`CREATE TABLE blob_proofs (
    token text PRIMARY KEY,
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    principal text NOT NULL,
    request_digest text NOT NULL,
    status text NOT NULL CHECK (status IN ('uploading', 'running', 'complete')),
    descriptors jsonb NOT NULL,
    verified jsonb,
    missing jsonb,
    lease_until timestamptz,
    version bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    UNIQUE (repo_id, principal, request_digest)
  )`
  yield* sql`CREATE INDEX blob_proofs_expiry ON blob_proofs (expires_at)`
  yield* sql`CREATE TABLE blob_proof_pages (
    token text NOT NULL REFERENCES blob_proofs (token) ON DELETE CASCADE,
    blob_index integer NOT NULL,
    first_chunk_index integer NOT NULL,
    chunk_count integer NOT NULL,
    chunks jsonb NOT NULL,
    PRIMARY KEY (token, blob_index, first_chunk_index)
  )`
})
