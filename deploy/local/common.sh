# Shared by demo.sh and test.sh: install, build, start the servers.
# Sourced, not run. Sets REPO, BUILD_DIR and the OUTBOX_* connection settings, and
# registers a trap that stops the servers on exit if this script started them.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${OUTBOX_BUILD_DIR:-$REPO/build}"
SERVERS="$REPO/deploy/local/servers.sh"

step() { printf '\n==> %s\n' "$*"; }

install_and_build() {
  step "Installing missing Debian packages"
  "$REPO/deploy/local/install-deps.sh"
  step "Building ($BUILD_DIR)"
  cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

start_servers() {
  step "Starting local PostgreSQL and RabbitMQ"
  local before
  before=$(bash "$SERVERS" status)
  bash "$SERVERS" start
  STOP_SERVERS_AT_EXIT=0  # only what this script started, unless asked to keep it
  if ! grep -q "postgres: running" <<<"$before" || ! grep -q "rabbitmq: running" <<<"$before"; then
    if [ "${OUTBOX_KEEP_SERVERS:-0}" != 1 ]; then
      STOP_SERVERS_AT_EXIT=1
      trap 'bash "$SERVERS" stop' EXIT
    fi
  fi
  eval "$(bash "$SERVERS" env)"
}
