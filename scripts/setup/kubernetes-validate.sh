#!/usr/bin/env bash
# Installs a pinned kubernetes-validate (it carries the Kubernetes JSON schemas in its package, so the
# manifests in infra/k8s are checked offline) into .venv/kubernetes-validate. Idempotent; quick when
# present. Used by test/ops/deploy-files.test.ts; run by `npm test` (pretest, through system-deps.sh).
set -euo pipefail

VERSION="1.37.0"
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.venv/kubernetes-validate"

if [ -x "$venv/bin/kubernetes-validate" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("kubernetes-validate"))' 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1; then
  echo "python3 -m venv is missing: apt-get install python3-venv" >&2
  exit 1
fi
echo "installing kubernetes-validate $VERSION into $venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$VERSION"
