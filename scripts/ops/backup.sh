#!/usr/bin/env bash
# A consistent backup of a Grove cluster (docs/operations.md): the database first, then the object store.
#
#   scripts/ops/backup.sh DIR
#
# Writes DIR/database.dump (pg_dump's custom format), DIR/objects/<namespace>/<hash> and DIR/BACKUP.
# Reusing DIR copies only the objects it does not hold yet (they are immutable); the dump is replaced.
# Environment: the nodes' GROVE_DATABASE_URL and GROVE_S3_* settings. PG_DUMP and NODE (Node 24) pick
# the programs (default: pg_dump and node on the PATH; pg_dump must be at least the server's version).
# Keep GROVE_SECRET_KEY (or the key file) with the backup, apart from it: CI secrets are encrypted with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: scripts/ops/backup.sh DIR}
: "${GROVE_DATABASE_URL:?GROVE_DATABASE_URL is not set}"
mkdir -p "$dir"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# 1. The database. pg_dump reads one snapshot (one repeatable-read transaction), whatever the nodes
#    write meanwhile: every row in it is as of the moment the dump started.
"${PG_DUMP:-pg_dump}" --format=custom --no-owner --no-privileges \
  --file "$dir/database.dump.partial" --dbname "$GROVE_DATABASE_URL"
mv "$dir/database.dump.partial" "$dir/database.dump"

# 2. The objects, after the dump. A chunk's bytes are stored before its row is written, and objects
#    are never changed, so every object a row of the dump names is already in the bucket and lands in
#    this copy — as long as gc does not delete it in between (docs/operations.md: pause gc).
#    Objects stored after the dump started are copied too; nothing in the dump names them (gc frees them).
"${NODE:-node}" "$here/objects.ts" download "$dir/objects"

printf 'Grove cluster backup\ndatabase dump started: %s\nobjects copied by: %s\n' \
  "$started" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$dir/BACKUP"
echo "backup: $dir (database dump started $started)"
