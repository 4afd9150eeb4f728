#!/usr/bin/env bash
# Installs the Debian packages outbox-relay needs to build, test and run its demo
# (with --demo, only those of the demo: the relay, the examples and the servers,
# no test or benchmark tools; with --image, also those of the container image test
# and of the Debian 13 leg, deploy/local/trixie-leg.sh; podman, runc and mmdebstrap
# are in the default list: the systemd unit's test needs them). Debian 12 (bookworm)
# and 13 (trixie); the release is read from /etc/os-release (OUTBOX_OS_RELEASE names another file, for a check).
# Idempotent: packages already installed are skipped, and apt is not touched at all
# when nothing is missing.
#   deploy/local/install-deps.sh [--demo | --image] [--list]   # --list: print the names, install nothing
set -euo pipefail

IMAGE=0 LIST=0 DEMO=0
for arg in "$@"; do
  case "$arg" in
    --demo) DEMO=1 ;;
    --image) IMAGE=1 ;;
    --list) LIST=1 ;;
    *) echo "install-deps: unknown argument '$arg'; usage: $0 [--demo | --image] [--list]" >&2; exit 2 ;;
  esac
done
if [ "$DEMO" = 1 ] && [ "$IMAGE" = 1 ]; then
  echo "install-deps: --demo and --image exclude each other (--image adds to the test suite's list)" >&2; exit 2
fi

# The names that differ between releases: PostgreSQL's server and client carry the
# major version (the scripts find the server binaries of whichever is installed:
# deploy/local/pg-bin.sh).
VERSION_ID=$(. "${OUTBOX_OS_RELEASE:-/etc/os-release}" && echo "${VERSION_ID:-}")
case "$VERSION_ID" in
  12) POSTGRES=(postgresql-15 postgresql-client-15)
      CONTAINER_DNS=(golang-github-containernetworking-plugin-dnsname) ;;  # podman 4.3 on CNI
  13) POSTGRES=(postgresql-17 postgresql-client-17)
      CONTAINER_DNS=(aardvark-dns netavark) ;;  # podman 5 on netavark
  *) POSTGRES=(postgresql postgresql-client) CONTAINER_DNS=()
     echo "install-deps: warning: Debian 12 and 13 are supported; this is VERSION_ID '${VERSION_ID:-none}'" \
          "($(. "${OUTBOX_OS_RELEASE:-/etc/os-release}" && echo "${PRETTY_NAME:-unknown}")): trying the generic package names" >&2 ;;
esac

# The demo's: the compiler, the libraries of the relay and the examples, the servers.
DEMO_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  # the man pages of outbox-relay and outbox-keys, made from their --help at build time
  # (without it the build warns and the Debian package has none)
  help2man
  libpqxx-dev librabbitmq-dev libboost-dev libboost-system-dev
  libyaml-cpp-dev libssl-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libcli11-dev
  "${POSTGRES[@]}" rabbitmq-server procps
)
PACKAGES=(
  "${DEMO_PACKAGES[@]}" doctest-dev libbenchmark-dev
  python3 iproute2
  # operations (issue 8): TLS test certificates, /metrics cross-check, dashboard picture
  openssl python3-prometheus-client python3-yaml python3-matplotlib systemd
  # the SQL contract from other languages and the package test (issue 14): Python
  python3-psycopg2 python3-pika
  # the Debian packages' check (package_rmqtest): lintian --pedantic on both packages
  lintian
  # the C++ format check (tools/check-format.sh, ctest format_test): .clang-format is
  # written for Debian 12's clang-format 14
  clang-format
  # the systemd unit's test (issue 38, ctest systemd_unit_rmqtest, in the default test
  # command): it boots systemd in a podman container (runc) made with mmdebstrap from
  # Debian's packages, and installs the relay's .deb there
  podman runc mmdebstrap
)
# The Node producer of the same test needs node and npm (the test installs the `pg`
# package from npm into the build tree). Debian's own only when neither is there, so a
# machine with another Node.js build keeps it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi
# --image: also what the container image test needs (deploy/docker/check-image.py, ctest
# label image, not part of the default test command) and the Debian 13 leg of .ci/run
# (deploy/local/trixie-leg.sh): podman's networking and compose (podman itself, runc and
# mmdebstrap are in the default list above).
if [ "$IMAGE" = 1 ]; then
  # Recommends of podman that --no-install-recommends leaves out: slirp4netns (the
  # image check's containers reach the host's loopback) and the DNS of compose
  # networks (services find each other by name).
  PACKAGES+=(slirp4netns "${CONTAINER_DNS[@]}" podman-compose)
fi
[ "$DEMO" = 1 ] && PACKAGES=("${DEMO_PACKAGES[@]}")
if [ "$LIST" = 1 ]; then echo "${PACKAGES[*]}"; exit 0; fi

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
