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
# The crate's lock file pins exact versions; when the registry here lacks one of them (webpki-roots 1.0.11 in
# November 2026), build with the newest compatible versions instead.
if ! cargo install oakvcs-cli --version "$version" --locked; then
  echo "oak.sh: the locked dependency versions cannot all be had here; building with the newest compatible ones" >&2
  cargo install oakvcs-cli --version "$version"
fi
echo "installed oak $version: $cargo_bin/oak"
