# Shared by demo.sh and test.sh: install, build, start the servers.
# Sourced, not run. Sets REPO, BUILD_DIR and the OUTBOX_* connection settings, and
# registers a trap that stops the servers on exit if this script started them.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${OUTBOX_BUILD_DIR:-$REPO/build}"
SERVERS="$REPO/deploy/local/servers.sh"

step() { printf '\n==> %s\n' "$*"; }

# install_and_build demo: only what the demo runs (its packages; the relay and the
# three examples, no tests or benchmarks), so a fresh machine gets there in minutes.
# install_and_build all: everything, for the test suite. Both use the same build
# folder and build type, so one reuses what the other compiled.
install_and_build() {
  local what=$1 deps=() options=() targets=()
  case "$what" in
    demo) deps=(--demo) targets=(--target outbox-relay order-service event-printer billing-consumer)
          options=(-DOUTBOX_BUILD_TESTS=OFF -DOUTBOX_BUILD_BENCH=OFF -DOUTBOX_BUILD_EXAMPLES=ON) ;;
    all) options=(-DOUTBOX_BUILD_TESTS=ON -DOUTBOX_BUILD_BENCH=ON -DOUTBOX_BUILD_EXAMPLES=ON) ;;
    *) echo "install_and_build: expected demo or all, got '$what'" >&2; return 2 ;;
  esac
  step "Installing missing Debian packages${deps:+ (${deps[*]})}"
  "$REPO/deploy/local/install-deps.sh" "${deps[@]}"
  step "Building ($BUILD_DIR${targets:+: ${targets[*]:1}})"
  cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${options[@]}" >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
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
