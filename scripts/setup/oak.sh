#!/usr/bin/env bash
# Installs the public Oak client (oakvcs-cli 0.109.0) for test/oak/oak.test.ts, when missing.
# Not run by `npm test` (building it takes several minutes); that suite is skipped without the binary.
# Needs a Rust toolchain (cargo); the binary lands in ${CARGO_HOME:-~/.cargo}/bin/oak.
set -euo pipefail

version="0.109.0"
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"

installed_version() {
  # A throwaway HOME and no update check: `oak --version` must not touch the network or real state.
  local home
  home="$(mktemp -d)"
  HOME="$home" OAK_NO_UPDATE_CHECK=1 "$1" --version 2>/dev/null | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1 || true
  rm -rf "$home"
}

for candidate in "$(command -v oak 2>/dev/null || true)" "$cargo_bin/oak"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && [ "$(installed_version "$candidate")" = "$version" ]; then
    echo "oak $version is installed: $candidate"
    exit 0
  fi
done

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust (https://rustup.rs), then run this script again" >&2
  exit 1
fi
cargo install oakvcs-cli --version "$version" --locked
echo "installed oak $version: $cargo_bin/oak"
