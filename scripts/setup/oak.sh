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
# The crate's lock file pins exact versions. When the registry here lacks one of them (webpki-roots 1.0.11 in
# November 2026: it serves up to 1.0.10), unpack the crate, move that one package to the newest version served
# (`cargo update --precise`, the rest of the lock file untouched) and build it `--locked`. The build directory is
# kept in ~/.cache/grove/oak-target, so a later build is incremental.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/grove"
mkdir -p "$cache"
export CARGO_TARGET_DIR="$cache/oak-target"
log="$(mktemp)"
if cargo install oakvcs-cli --version "$version" --locked 2>"$log"; then
  rm -f "$log"
  echo "installed oak $version: $cargo_bin/oak"
  exit 0
fi
cat "$log" >&2
missing="$(grep -Eo 'failed to select a version for the requirement `[a-z0-9_-]+ = "=[0-9.]+"' "$log" | head -n 1 | sed -E 's/.*`([a-z0-9_-]+) = "=([0-9.]+)".*/\1 \2/' || true)"
rm -f "$log"
crate_src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/oakvcs-cli-"$version" 2>/dev/null | head -n 1 || true)"
if [ -z "$crate_src" ]; then
  crate_file="$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/oakvcs-cli-"$version".crate 2>/dev/null | head -n 1 || true)"
  [ -n "$crate_file" ] || { echo "oak.sh: the oakvcs-cli $version crate was not downloaded" >&2; exit 1; }
  tar -xzf "$crate_file" -C "$cache"
  crate_src="$cache/oakvcs-cli-$version"
fi
work="$cache/oak-src-$version"
rm -rf "$work"
cp -r "$crate_src" "$work"
package="${missing%% *}"
package="${package:-webpki-roots}"
pinned=""
# The newest served version below the locked one, same major and minor.
locked="$(grep -A1 "^name = \"$package\"$" "$work/Cargo.lock" | sed -nE 's/^version = "([0-9.]+)"/\1/p' | head -n 1)"
major_minor="${locked%.*}"
patch="${locked##*.}"
while [ "$patch" -gt 0 ]; do
  patch=$((patch - 1))
  if (cd "$work" && cargo update -p "$package@$locked" --precise "$major_minor.$patch" >/dev/null 2>&1); then
    pinned="$major_minor.$patch"
    break
  fi
done
[ -n "$pinned" ] || { echo "oak.sh: no served version of $package below $locked" >&2; exit 1; }
echo "oak.sh: $package $locked is not served here; building with $pinned, the rest of Cargo.lock as shipped" >&2
cargo install --path "$work" --locked
echo "installed oak $version: $cargo_bin/oak"
