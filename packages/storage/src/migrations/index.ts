/**
 * The one ordered set of migrations for both the embedded and the cluster
 * database. Keys are `<id>_<name>`; add new ones at the end, never edit an
 * applied one.
 */
import type { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import entityRuntime from "./0001_entity_runtime.ts"
import identityRepositories from "./0002_identity_repositories.ts"
import content from "./0003_content.ts"
import ciRuns from "./0004_ci_runs.ts"
import commandRequests from "./0005_command_requests.ts"
import objectUploads from "./0006_object_uploads.ts"
import orgGroups from "./0007_org_groups.ts"
import serviceAccounts from "./0008_service_accounts.ts"
import ci from "./0009_ci.ts"
import webhooks from "./0010_webhooks.ts"
import pushStages from "./0011_push_stages.ts"
import ciRunnerHeartbeats from "./0012_ci_runner_heartbeats.ts"
import releases from "./0013_releases.ts"
import sites from "./0014_sites.ts"
import gcMarks from "./0015_gc_marks.ts"
import accessNotify from "./0016_access_notify.ts"
import commitFilesJson from "./0017_commit_files_json.ts"
import blobsUnmarked from "./0018_blobs_unmarked.ts"
import chunksFillfactor from "./0019_chunks_fillfactor.ts"
import contentKeyChecks from "./0020_content_key_checks.ts"
import deletedOrganizations from "./0021_deleted_organizations.ts"
import mergePathForeignKeys from "./0022_merge_path_foreign_keys.ts"
import blobChunksUnchecked from "./0023_blob_chunks_unchecked.ts"
import pushRowsUncompressed from "./0024_push_rows_uncompressed.ts"

export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_entity_runtime": entityRuntime,
  "0002_identity_repositories": identityRepositories,
  "0003_content": content,
  "0004_ci_runs": ciRuns,
  "0005_command_requests": commandRequests,
  "0006_object_uploads": objectUploads,
  "0007_org_groups": orgGroups,
  "0008_service_accounts": serviceAccounts,
  "0009_ci": ci,
  "0010_webhooks": webhooks,
  "0011_push_stages": pushStages,
  "0012_ci_runner_heartbeats": ciRunnerHeartbeats,
  "0013_releases": releases,
  "0014_sites": sites,
  "0015_gc_marks": gcMarks,
  "0016_access_notify": accessNotify,
  "0017_commit_files_json": commitFilesJson,
  "0018_blobs_unmarked": blobsUnmarked,
  "0019_chunks_fillfactor": chunksFillfactor,
  "0020_content_key_checks": contentKeyChecks,
  "0021_deleted_organizations": deletedOrganizations,
  "0022_merge_path_foreign_keys": mergePathForeignKeys,
  "0023_blob_chunks_unchecked": blobChunksUnchecked,
  "0024_push_rows_uncompressed": pushRowsUncompressed
}
