#!/usr/bin/env bash
# The build steps of deploy/docker/Dockerfile, as a script, so they also run (and
# are checked) on a plain Debian 12 or 13 machine without Docker:
#
#   build-steps.sh deps              install the build packages (apt)
#   build-steps.sh build SRC ROOT [BUILD]  build in BUILD (SRC/build-image), install into ROOT:
#                                    ROOT/usr/local/bin/{outbox-relay,order-service,event-printer}
#                                    ROOT/usr/share/outbox-relay/{roles.sql,events/}
#   build-steps.sh runtime-packages [12|13]  print the runtime packages of the slim stage
#                                    (of this machine's release unless one is named)
#   build-steps.sh check-runtime ROOT  every shared library the binaries need comes
#                                    from one of the runtime packages (dpkg -S)
set -euo pipefail

BUILD_PACKAGES=(build-essential cmake ninja-build pkg-config libpqxx-dev librabbitmq-dev
  libboost-dev libboost-system-dev libyaml-cpp-dev doctest-dev libssl-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libbenchmark-dev libcli11-dev)
# The shared libraries' packages are named by version, so each release has its list
# (Debian 13's 64-bit time_t transition renamed libssl3 to libssl3t64).
runtime_packages() {
  case "$1" in
    12) echo libpqxx-6.4 librabbitmq4 libyaml-cpp0.7 libspdlog1.10 libfmt9 \
          libboost-system1.74.0 libssl3 libpq5 libstdc++6 libgcc-s1 libc6 ca-certificates ;;
    13) echo libpqxx-7.10 librabbitmq4 libyaml-cpp0.8 libspdlog1.15 libfmt10 \
          libboost-system1.83.0 libssl3t64 libpq5 libstdc++6 libgcc-s1 libc6 ca-certificates ;;
    *) echo "build-steps.sh: Debian release '$1' is not supported (12 or 13)" >&2; return 2 ;;
  esac
}
this_release() { (. /etc/os-release && echo "${VERSION_ID%%.*}"); }
BINARIES=(outbox-relay outbox-keys order-service event-printer)

case "${1:-}" in
  deps)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${BUILD_PACKAGES[@]}"
    ;;
  build)
    src=$2 root=$3 build=${4:-$2/build-image}
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" --target "${BINARIES[@]}"
    install -d "$root/usr/local/bin" "$root/usr/share/outbox-relay" "$root/etc/outbox-relay"
    install -m 755 "$build/relay/outbox-relay" "$build/crypto/outbox-keys" "$build/examples/order-service" \
      "$build/examples/event-printer" "$root/usr/local/bin/"
    install -m 644 "$src/schema/roles.sql" "$root/usr/share/outbox-relay/"
    cp -r "$src/schema/events" "$root/usr/share/outbox-relay/events"
    "$root/usr/local/bin/outbox-relay" --version
    ;;
  runtime-packages)
    runtime_packages "${2:-$(this_release)}"
    ;;
  check-runtime)
    root=$2 missing=0
    read -r -a RUNTIME_PACKAGES <<<"$(runtime_packages "$(this_release)")"
    # The runtime packages and everything they depend on (what apt installs).
    closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
                --no-replaces --no-enhances "${RUNTIME_PACKAGES[@]}" |
              sed -n -e 's/^ *\(Pre\)\{0,1\}Depends: <\{0,1\}\([^>]*\)>\{0,1\}$/\2/p' -e '/^[a-z]/p' |
              sed 's/:any$//' | sort -u)
    for b in "${BINARIES[@]}"; do
      [ -x "$root/usr/local/bin/$b" ] || { echo "check-runtime: $root/usr/local/bin/$b is missing" >&2; exit 1; }
      for lib in $(ldd "$root/usr/local/bin/$b" | awk '/=> \//{print $3}'); do
        pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1 || true)
        [ -n "$pkg" ] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1 || true)
        if ! grep -qx "$pkg" <<<"$closure"; then
          echo "$b: $lib comes from '${pkg:-no package}', which the runtime stage does not install" >&2
          missing=1
        fi
      done
    done
    [ $missing -eq 0 ] && echo "check-runtime: every shared library comes from the runtime packages or their dependencies"
    exit $missing
    ;;
  *) echo "usage: $0 deps | build SRC ROOT | runtime-packages [12|13] | check-runtime ROOT" >&2; exit 2 ;;
esac
