#!/usr/bin/env bash
# Restores a backup made by scripts/ops/backup.sh into an EMPTY cluster (docs/operations.md):
# the objects first, then the database; start the nodes afterwards, then run grove-server fsck.
#
#   scripts/ops/restore.sh DIR
#
# Environment: the new cluster's GROVE_DATABASE_URL (an empty database) and GROVE_S3_* (an empty
# bucket). PG_RESTORE, PSQL and NODE pick the programs (default: on the PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: scripts/ops/restore.sh DIR}
: "${GROVE_DATABASE_URL:?GROVE_DATABASE_URL is not set}"
[ -f "$dir/database.dump" ] && [ -d "$dir/objects" ] || { echo "restore: $dir holds no backup (database.dump and objects/)" >&2; exit 1; }

# A restore never merges into a running or used cluster.
tables=$("${PSQL:-psql}" --no-psqlrc --quiet --tuples-only --no-align --dbname "$GROVE_DATABASE_URL" \
  --command "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
if [ "$tables" != "0" ]; then
  echo "restore: the database already has $tables tables: restore into an empty database" >&2
  exit 1
fi

# 1. The objects first (the upload refuses a bucket that has objects): then every row restored next
#    names an object that is already there, even to a node started early.
"${NODE:-node}" "$here/objects.ts" upload "$dir/objects"

# 2. The database, in one transaction: all of it or nothing.
"${PG_RESTORE:-pg_restore}" --no-owner --no-privileges --exit-on-error --single-transaction \
  --dbname "$GROVE_DATABASE_URL" "$dir/database.dump"

echo "restore: done. Start the nodes (with the backed-up cluster's GROVE_SECRET_KEY), then run grove-server fsck."
