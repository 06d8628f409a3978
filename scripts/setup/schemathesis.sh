#!/usr/bin/env bash
# Installs a pinned schemathesis into a virtualenv under .venv/schemathesis (idempotent; quick when present).
# Used by test/server/fuzz.test.ts; run by `npm test` (pretest, through system-deps.sh).
set -euo pipefail

VERSION="4.32.5"
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.venv/schemathesis"

if [ -x "$venv/bin/st" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1; then
  echo "python3 -m venv is missing: apt-get install python3-venv" >&2
  exit 1
fi
echo "installing schemathesis $VERSION into $venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
