#!/usr/bin/env bash
# Installs the Debian packages the tests and cluster mode need, when missing.
# Idempotent and quick when everything is present; run by `npm test` (pretest).
set -euo pipefail

# Schemathesis (pinned, in .venv/schemathesis) for test/server/fuzz.test.ts, once python3-venv is there.
# kubernetes-validate (pinned, in .venv/kubernetes-validate) for test/ops/deploy-files.test.ts.
trap 'if [ $? -eq 0 ]; then bash "$(dirname "$0")/schemathesis.sh" && bash "$(dirname "$0")/kubernetes-validate.sh" || exit 1; fi' EXIT

need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v minisign >/dev/null 2>&1 || need+=(minisign)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
command -v git >/dev/null 2>&1 || need+=(git)
command -v mvn >/dev/null 2>&1 || need+=(maven)
# The JDK, not just the JRE: test/infra/kafka.test.ts compiles a one-file Java check of the partitioner.
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
python3 -m venv --help >/dev/null 2>&1 || need+=(python3-venv)
# Headless Chromium for test/server/signin.browser.test.ts (driven by playwright-core; no browser download),
# with the fonts its Recommends would bring, so screenshots have text.
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-liberation)
# FUSE for `oak mount` in test/oak (the client mounts through fusermount3).
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
# bubblewrap: every CI step runs in its own sandbox (packages/server/src/ci/Sandbox.ts); without it a
# node starts no CI runners. setpriv and nsenter (util-linux, always there) start it as each job's own uid, in a kept
# network namespace (NetnsPool.ts) when the network is on.
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
# passt (pasta): a step with the network on gets its own network namespace behind it, without the host's loopback.
command -v pasta >/dev/null 2>&1 || need+=(passt)
# The server image and its smoke test (test/ops/container.test.ts): podman builds and runs it (with runc:
# crun refuses a host whose cgroups mix v1 and v2), mmdebstrap makes the local base image; docker-compose
# validates docker/compose.yaml (test/ops/deploy-files.test.ts).
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v newuidmap >/dev/null 2>&1 || need+=(uidmap)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)

# pasta opens /dev/net/tun as each job's uid: Debian's udev makes it 0666 (creating a device still needs
# CAP_NET_ADMIN in one's own namespace); hosts without udev (containers, some VMs) leave it 0600.
if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
  if [ "$(id -u)" = "0" ]; then
    chmod 0666 /dev/net/tun
  else
    echo "/dev/net/tun is not 0666: CI steps with the network on cannot start (as root: chmod 0666 /dev/net/tun)" >&2
    exit 1
  fi
fi

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "missing system packages: ${need[*]} (run as root, or install them: apt-get install ${need[*]})" >&2
  exit 1
fi
echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
