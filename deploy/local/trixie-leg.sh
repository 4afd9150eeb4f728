#!/usr/bin/env bash
# The Debian 13 (trixie) leg of CI (.ci/run runs it after the README's test command):
# builds the project in a Debian 13 container (GCC 14, libpqxx 7.10, rabbitmq-c 0.15,
# Boost 1.83, spdlog 1.15, yaml-cpp 0.8), starts PostgreSQL 17 and RabbitMQ 4.0 inside
# it with deploy/local/servers.sh, and runs a subset of the tests against them.
#
#   deploy/local/trixie-leg.sh                 # the default subset (below)
#   deploy/local/trixie-leg.sh -R relay_       # any other ctest selection instead
#
# Default subset: labels pure and pg (but deploy_files_test, which checks the Debian 12 image
# files against apt lists the container has not got, and format_test, whose .clang-format is
# clang-format 14's: the image has none), the SQL contract from Python and
# Node (polyglot_npm_install, sql_contract_polyglot_rmqtest), the hostile rows
# (hostile_rows_rmqtest, admin_hostile_rows_pgtest), one bounded chaos run (chaos_ci)
# and the Debian packages (package_rmqtest). Only what those tests need is built
# (OUTBOX_TRIXIE_TARGETS=all builds everything).
#
# The image, localhost/outbox-trixie:build, is made once from Debian packages with
# mmdebstrap (no registry needed, and no apt run inside) and kept in podman's store;
# the tar it is imported from is kept too (OUTBOX_TRIXIE_TAR), so a removed image is
# imported again without a download. A change of IMAGE_PACKAGES below makes both again
# (the image is labelled with a hash of the list); OUTBOX_TRIXIE_REBUILD_IMAGE=1 forces it.
#
# Settings (environment):
#   OUTBOX_TRIXIE_IMAGE       default localhost/outbox-trixie:build
#   OUTBOX_TRIXIE_TAR         default /var/tmp/outbox-trixie/trixie.tar
#   OUTBOX_TRIXIE_MIRROR      default the URIs: line of /etc/apt/sources.list.d/*.sources
#                             (else the first deb line of /etc/apt/sources.list, else
#                             http://deb.debian.org/debian)
#   OUTBOX_TRIXIE_BUILD_DIR   default REPO/build-trixie (kept between runs: incremental)
#   OUTBOX_TRIXIE_PG_PORT     default 45432   } the servers inside; --network host, so
#   OUTBOX_TRIXIE_AMQP_PORT   default 45472   } they must not clash with the host's
#                             (35432, 35673) nor the tests' private ones (36000-44999);
#                             Erlang's distribution port is the AMQP port + 20000
#   OUTBOX_TRIXIE_EPMD_PORT   default 45369: the container's own epmd, so its RabbitMQ
#                             nodes never register with (or start) the host's
#   OUTBOX_TRIXIE_TARGETS     needed (default) | all | none (test what an earlier run built)
#   OUTBOX_TRIXIE_JOBS        build jobs, default nproc
#   OUTBOX_TRIXIE_NICE        niceness of the build and the tests, default 0
#   OUTBOX_TRIXIE_NOFILE      the container's open-file limit, soft:hard; default the host's
#   OUTBOX_TRIXIE_NPROC       its process limit, default 4096:4096
# Exit status: ctest's (0 when every selected test passed), 1 on a set-up or build failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGE="${OUTBOX_TRIXIE_IMAGE:-localhost/outbox-trixie:build}"
TAR="${OUTBOX_TRIXIE_TAR:-/var/tmp/outbox-trixie/trixie.tar}"
BUILD_DIR="${OUTBOX_TRIXIE_BUILD_DIR:-$REPO/build-trixie}"
PG_PORT="${OUTBOX_TRIXIE_PG_PORT:-45432}"
AMQP_PORT="${OUTBOX_TRIXIE_AMQP_PORT:-45472}"
EPMD_PORT="${OUTBOX_TRIXIE_EPMD_PORT:-45369}"
TARGETS="${OUTBOX_TRIXIE_TARGETS:-needed}"
case "$TARGETS" in needed|all|none) ;; *) echo "OUTBOX_TRIXIE_TARGETS must be needed, all or none" >&2; exit 2 ;; esac
JOBS="${OUTBOX_TRIXIE_JOBS:-$(nproc)}"
NICE="${OUTBOX_TRIXIE_NICE:-0}"

# Build and server packages of the image (the names of Debian 13).
IMAGE_PACKAGES=(
  ca-certificates build-essential cmake ninja-build pkg-config
  libpqxx-dev librabbitmq-dev libboost-dev libboost-system-dev libyaml-cpp-dev doctest-dev
  libssl-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libbenchmark-dev libcli11-dev
  postgresql rabbitmq-server
  python3 python3-psycopg2 python3-pika python3-yaml python3-prometheus-client
  procps iproute2 openssl dpkg-dev file nodejs npm
  help2man lintian
)
# What the tests need from the image (checked before the build: an image made from an
# older package list says what is missing instead of failing half-way through).
IMAGE_COMMANDS=(cmake ninja c++ pkg-config psql node npm python3 dpkg-deb dpkg-shlibdeps openssl ss su
                help2man lintian man readelf
                /usr/lib/rabbitmq/bin/rabbitmq-server /usr/lib/rabbitmq/bin/rabbitmqctl)
IMAGE_PYTHON_MODULES="psycopg2, pika, yaml, prometheus_client"
# The libraries and servers the leg reports it built and ran with.
VERSION_PACKAGES=(gcc g++ cmake libpqxx-dev librabbitmq-dev libboost-dev libspdlog-dev libfmt-dev
                  libyaml-cpp-dev libssl-dev postgresql rabbitmq-server erlang-base nodejs)
DEFAULT_TESTS=(polyglot_npm_install sql_contract_polyglot_rmqtest hostile_rows_rmqtest admin_hostile_rows_pgtest
               chaos_ci package_rmqtest sequence_guard_rmqtest
               scheduled_delivery_rmqtest scheduled_enqueue_pgtest)
EXCLUDED_PURE=(deploy_files_test format_test)

step() { printf '\n==> [trixie] %s\n' "$*"; }
elapsed() { local s=$1; printf '%dm%02ds' $((s / 60)) $((s % 60)); }
TIMES=()
timed() { # timed LABEL COMMAND...: runs COMMAND, records how long it took
  local label="$1" t0=$SECONDS rc=0; shift
  "$@" || rc=$?
  TIMES+=("$(printf '%-28s %s' "$label" "$(elapsed $((SECONDS - t0)))")$([ $rc = 0 ] || echo " (failed, exit $rc)")")
  return $rc
}
print_times() { local t; for t in "${TIMES[@]}"; do echo "  $t"; done; }

# ---------------------------------------------------------------- on the host ----

default_mirror() {
  local uri=""
  uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
                           /etc/apt/sources.list 2>/dev/null || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

make_tar() {
  local mirror="${OUTBOX_TRIXIE_MIRROR:-$(default_mirror)}" include
  include=$(IFS=,; echo "${IMAGE_PACKAGES[*]}")
  mkdir -p "$(dirname "$TAR")"
  echo "mmdebstrap --variant=apt trixie from $mirror (about 4 minutes) into $TAR"
  rm -f "$TAR.partial"
  # Into a partial file first: an interrupted run never leaves a tar that looks whole.
  mmdebstrap --quiet --variant=apt --format=tar --include="$include" trixie "$TAR.partial" "$mirror"
  mv "$TAR.partial" "$TAR"
}

# The image carries the hash of the package list it was made from (label
# outbox.packages): after a change of IMAGE_PACKAGES, the next run makes it again by
# itself (an image from before the label counts as another list).
packages_hash() { printf '%s\n' "${IMAGE_PACKAGES[@]}" | sha256sum | cut -c1-16; }

import_tar() {
  echo "podman import $TAR $IMAGE"
  podman import --quiet --change "LABEL outbox.packages=$(packages_hash)" "$TAR" "$IMAGE" >/dev/null
}

ensure_image() {
  if podman image exists "$IMAGE" &&
     [ "$(podman image inspect -f '{{index .Labels "outbox.packages"}}' "$IMAGE")" != "$(packages_hash)" ]; then
    echo "image $IMAGE: made from another package list than IMAGE_PACKAGES; making it again"
    OUTBOX_TRIXIE_REBUILD_IMAGE=1
  fi
  if [ "${OUTBOX_TRIXIE_REBUILD_IMAGE:-0}" = 1 ]; then
    if podman image exists "$IMAGE"; then podman rmi "$IMAGE" >/dev/null; fi
    rm -f "$TAR"
  fi
  if podman image exists "$IMAGE"; then
    echo "image $IMAGE: present, reused ($(podman image inspect -f '{{.Created}}' "$IMAGE" | cut -d. -f1))"
    return
  fi
  if [ ! -s "$TAR" ]; then timed "image: mmdebstrap" make_tar; else echo "tar $TAR: present, reused"; fi
  timed "image: podman import" import_tar
}

# The Node producer's `pg` package (polyglot_npm_install: npm install --prefer-offline).
# The container's npm keeps its cache in the build folder (a second run needs no
# registry); the host's cache, which the Debian 12 leg has just filled, is added to it
# (files it has not got: npm 9's entries are not replaced). When the host tells Node to
# trust more CAs (NODE_EXTRA_CA_CERTS, or npm's cafile: a proxy that intercepts TLS), the
# container's npm is given the same file, read-only.
NPM_ARGS=()
npm_setup() {
  local cache ca
  cache="$(npm config get cache 2>/dev/null || true)/_cacache"
  mkdir -p "$BUILD_DIR/npm-cache"
  if [ -d "$cache" ]; then
    cp -a -n "$cache" "$BUILD_DIR/npm-cache/"
    echo "npm cache: $cache added to $BUILD_DIR/npm-cache"
  fi
  NPM_ARGS=(-e npm_config_cache=/build/npm-cache -e npm_config_update_notifier=false)
  ca="${NODE_EXTRA_CA_CERTS:-$(npm config get cafile 2>/dev/null || true)}"
  if [ -n "$ca" ] && [ -f "$ca" ]; then
    NPM_ARGS+=(-v "$ca:/etc/outbox-host-ca.crt:ro" -e NODE_EXTRA_CA_CERTS=/etc/outbox-host-ca.crt)
    echo "npm: the host's extra CAs ($ca) trusted by the container's Node"
  fi
}

# Open files as on the host (the Debian 12 leg's tests run with them: http_server_test
# raises its soft limit to 2048), processes 4096. runc refuses limits above what it may
# set (here nproc 96367 is refused, nofile 20000 is not): then 1024 for both, the
# values known to work everywhere, and the tests that need more fail saying so.
LIMIT_ARGS=()
container_limits() {
  local nofile="${OUTBOX_TRIXIE_NOFILE:-$(ulimit -Sn):$(ulimit -Hn)}" nproc="${OUTBOX_TRIXIE_NPROC:-4096:4096}"
  LIMIT_ARGS=(--ulimit "nofile=$nofile" --ulimit "nproc=$nproc")
  if ! podman --runtime runc run --rm "${LIMIT_ARGS[@]}" "$IMAGE" true >/dev/null 2>&1; then
    echo "warning: podman refused --ulimit nofile=$nofile nproc=$nproc; using 1024:1024 for both" >&2
    LIMIT_ARGS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
  fi
  echo "container limits: ${LIMIT_ARGS[*]}"
}

host_main() {
  local t_leg=$SECONDS
  [ "$(id -u)" -eq 0 ] || { echo "trixie-leg: run as root (podman with runc, mmdebstrap)" >&2; exit 1; }
  step "Installing podman, runc and mmdebstrap if missing"
  "$REPO/deploy/local/install-deps.sh" --image
  step "The Debian 13 image ($IMAGE)"
  ensure_image
  mkdir -p "$BUILD_DIR"
  npm_setup
  local name="outbox-trixie-leg-$$"
  # The container's processes (build, servers, tests) die with it; this removes it if
  # this script is interrupted before podman run returns.
  trap 'podman rm -f --ignore --time 10 "'"$name"'" >/dev/null 2>&1 || true' EXIT
  step "Running the leg in container $name (source $REPO read-only at /src, build $BUILD_DIR at /build)"
  container_limits
  local rc=0 t0=$SECONDS
  podman --runtime runc run --rm --name "$name" --network host \
    "${LIMIT_ARGS[@]}" \
    -v "$REPO:/src:ro" -v "$BUILD_DIR:/build" \
    -e LANG=C.UTF-8 -e ERL_EPMD_PORT="$EPMD_PORT" \
    "${NPM_ARGS[@]}" \
    -e OUTBOX_TRIXIE_PG_PORT="$PG_PORT" -e OUTBOX_TRIXIE_AMQP_PORT="$AMQP_PORT" \
    -e OUTBOX_TRIXIE_TARGETS="$TARGETS" -e OUTBOX_TRIXIE_JOBS="$JOBS" -e OUTBOX_TRIXIE_NICE="$NICE" \
    "$IMAGE" bash /src/deploy/local/trixie-leg.sh --inside "$@" || rc=$?
  TIMES+=("$(printf '%-28s %s' "container (all of it)" "$(elapsed $((SECONDS - t0)))")")
  step "Debian 13 leg: exit $rc after $(elapsed $((SECONDS - t_leg)))"
  print_times
  return $rc
}

# ---------------------------------------------------------- in the container ----

INSIDE_BUILD=/build
SERVERS=/src/deploy/local/servers.sh

versions() {
  echo "Debian $(cat /etc/debian_version); built and tested with:"
  dpkg-query -W -f='  ${Package} ${Version}\n' "${VERSION_PACKAGES[@]}" 2>/dev/null || true
}

check_image() {
  local missing=() c
  for c in "${IMAGE_COMMANDS[@]}"; do command -v "$c" >/dev/null || missing+=("$c"); done
  python3 -c "import $IMAGE_PYTHON_MODULES" 2>/dev/null || missing+=("python3 modules: $IMAGE_PYTHON_MODULES")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "the image lacks: ${missing[*]}; make it again: OUTBOX_TRIXIE_REBUILD_IMAGE=1 deploy/local/trixie-leg.sh" >&2
    exit 1
  fi
}

configure() {
  nice -n "$NICE" cmake -S /src -B "$INSIDE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$INSIDE_BUILD/configure.log" 2>&1 \
    || { tail -n 40 "$INSIDE_BUILD/configure.log"; return 1; }
}

# The ninja targets the selected tests need: the build files each selected test's
# command names (its executable, or an argument: deploy_files_test's --relay), read
# from the CTestTestfile.cmake files (ctest itself leaves out the command of a test
# whose executable is not built yet), and every file `cmake --install` takes from the
# build folder (the relay, outbox-keys, the SDK libraries: package_rmqtest packs them,
# and cpack does not build).
needed_targets() {
  ctest --test-dir "$INSIDE_BUILD" --show-only=json-v1 "$@" >"$INSIDE_BUILD/selected-tests.json" || return 1
  ninja -C "$INSIDE_BUILD" -t targets all >"$INSIDE_BUILD/ninja-outputs.txt" || return 1
  python3 - "$INSIDE_BUILD" <<'PY'
import json, os, pathlib, re, sys
build = sys.argv[1]
known = {line.rsplit(": ", 1)[0] for line in open(os.path.join(build, "ninja-outputs.txt"))}
selected = {t["name"] for t in json.load(open(os.path.join(build, "selected-tests.json")))["tests"]}
wanted = []
for f in sorted(pathlib.Path(build).rglob("CTestTestfile.cmake")):
    for name, args in re.findall(r'^add_test\(\[=\[(.+?)\]=\] (.*)\)$', f.read_text(), re.M):
        if name in selected:
            wanted += re.findall(r'"([^"]*)"', args)
for f in sorted(pathlib.Path(build).rglob("cmake_install.cmake")):
    wanted += re.findall(r'"(' + re.escape(build) + r'/[^"$]+)"', f.read_text())
out = []
for p in wanted:
    rel = os.path.relpath(p, build) if p.startswith(build + "/") else None
    if rel in known and rel not in out:
        out.append(rel)
print("\n".join(out))
PY
}

build() {
  if [ "$TARGETS" = none ]; then
    echo "OUTBOX_TRIXIE_TARGETS=none: nothing built"
  elif [ "$TARGETS" = all ]; then
    nice -n "$NICE" ninja -C "$INSIDE_BUILD" -j "$JOBS"
  else
    needed_targets "$@" >"$INSIDE_BUILD/needed-targets.txt" || return 1
    mapfile -t targets <"$INSIDE_BUILD/needed-targets.txt"
    [ ${#targets[@]} -gt 0 ] || { echo "no build targets found for the selected tests" >&2; return 1; }
    echo "building ${#targets[@]} targets for $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["tests"]))' \
      "$INSIDE_BUILD/selected-tests.json") tests: ${targets[*]}"
    nice -n "$NICE" ninja -C "$INSIDE_BUILD" -j "$JOBS" "${targets[@]}"
  fi
}

start_servers() {  # (returns at the first failure: timed runs it where set -e does not apply)
  bash "$SERVERS" start || return 1
  eval "$(bash "$SERVERS" env)"
  echo "$(psql "$OUTBOX_PG_DSN" -Atc 'SELECT version()')"
  echo "RabbitMQ $(bash "$SERVERS" rabbitmqctl -q eval 'rabbit_misc:version().' 2>/dev/null | tr -d '"')" \
       "(epmd port $ERL_EPMD_PORT)"
}

run_tests() {
  local rc=0
  ( cd "$INSIDE_BUILD" && nice -n "$NICE" ctest --output-on-failure --timeout 900 "$@" ) 2>&1 \
    | tee "$INSIDE_BUILD/ctest.log" || rc=$?
  return $rc
}

summary() {
  echo
  versions
  echo "ctest ($INSIDE_BUILD/ctest.log, on the host in the build folder):"
  if [ -f "$INSIDE_BUILD/ctest.log" ]; then
    grep -E "tests passed|tests failed|Total Test time" "$INSIDE_BUILD/ctest.log" | sed 's/^/  /' || true
    sed -n '/The following tests FAILED/,$p' "$INSIDE_BUILD/ctest.log" | sed 's/^/  /'
  else
    echo "  (not run)"
  fi
  echo "times:"
  print_times
}

inside_main() {
  export OUTBOX_LOCAL_DIR=/tmp/outbox-trixie-local OUTBOX_PG_PORT="$PG_PORT" OUTBOX_AMQP_PORT="$AMQP_PORT"
  # PID 1 ignores signals it does not trap: make INT and TERM run the EXIT trap.
  trap 'exit 130' INT; trap 'exit 143' TERM
  trap 'rc=$?; bash "$SERVERS" stop || true; summary; exit $rc' EXIT
  step "Versions"
  versions
  check_image
  step "Configuring (/src -> $INSIDE_BUILD)"
  timed "cmake configure" configure
  local selection=("$@")
  if [ ${#selection[@]} -eq 0 ]; then
    local pure pg regex
    pure=$(ctest --test-dir "$INSIDE_BUILD" -N -L '^pure$' | awk '/Test +#/ {print $3}' \
             | grep -vxF -f <(printf '%s\n' "${EXCLUDED_PURE[@]}") || true)
    # Every PostgreSQL test: migrations, roles, the row checks and the SQL contract on 17.
    pg=$(ctest --test-dir "$INSIDE_BUILD" -N -L '^pg$' | awk '/Test +#/ {print $3}' || true)
    regex="^($(echo $pure $pg "${DEFAULT_TESTS[@]}" | tr ' ' '|'))\$"
    selection=(-R "$regex")
  fi
  step "Building ($TARGETS, -j$JOBS, nice $NICE)"
  timed "build ($TARGETS)" build "${selection[@]}"
  step "Starting PostgreSQL and RabbitMQ in the container (127.0.0.1:$PG_PORT, :$AMQP_PORT)"
  timed "servers start" start_servers
  step "Running the tests: ctest ${selection[*]}"
  timed "ctest" run_tests "${selection[@]}"
}

if [ "${1:-}" = --inside ]; then
  shift
  inside_main "$@"
else
  host_main "$@"
fi
