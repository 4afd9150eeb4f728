#!/usr/bin/env bash
# Installs the Debian 12 packages outbox-relay needs to build, test and run its demo
# (with --image, also those of the container image test).
# Idempotent: packages already installed are skipped, and apt is not touched at all
# when nothing is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libpqxx-dev librabbitmq-dev libboost-dev libboost-system-dev
  libyaml-cpp-dev doctest-dev libssl-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libbenchmark-dev libcli11-dev
  postgresql-15 postgresql-client-15 rabbitmq-server
  python3 procps iproute2
  # operations (issue 8): TLS test certificates, /metrics cross-check, dashboard picture
  openssl python3-prometheus-client python3-yaml python3-matplotlib systemd
  # the SQL contract from other languages and the package test (issue 14): Python
  python3-psycopg2 python3-pika
)
# The Node producer of the same test needs node and npm (the test installs the `pg`
# package from npm into the build tree). Debian's own only when neither is there, so a
# machine with another Node.js build keeps it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi
# --image: also what the container image test needs (deploy/docker/check-image.py, ctest
# label image, not part of the default test command): podman and base images from packages.
if [ "${1:-}" = --image ]; then
  PACKAGES+=(podman runc mmdebstrap podman-compose)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# policy-rc.d keeps the packages' own service scripts from starting system-wide servers.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
