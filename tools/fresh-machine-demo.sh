#!/usr/bin/env bash
# Times README's demo command on a fresh machine: a Debian system with nothing but
# apt (mmdebstrap --variant=apt, as a podman container), a clean copy of the
# committed tree (git archive HEAD: no build folder), then `deploy/local/demo.sh` as
# root. Prints each step of the demo with the seconds since the start, and the total.
# Needs podman, mmdebstrap and the network (the container installs its packages from
# the Debian mirror, as a new machine would). Not part of the test suite: it
# measures, the figure goes in the release notes.
#   tools/fresh-machine-demo.sh [bookworm|trixie]
#   OUTBOX_FRESH_MIRROR=http://deb.debian.org/debian   (default: this host's mirror)
set -euo pipefail
RELEASE="${1:-bookworm}"
case "$RELEASE" in
  bookworm | trixie) ;;
  *) echo "fresh-machine-demo: expected bookworm or trixie, got '$RELEASE'" >&2; exit 2 ;;
esac
for tool in podman mmdebstrap git; do
  command -v "$tool" >/dev/null || { echo "fresh-machine-demo: '$tool' is missing (apt install $tool)" >&2; exit 2; }
done
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="localhost/outbox-fresh:$RELEASE"
TAR="/var/tmp/outbox-fresh-$RELEASE.tar"
mirror="${OUTBOX_FRESH_MIRROR:-$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' \
  /etc/apt/sources.list.d/*.sources 2>/dev/null || true)}"
mirror="${mirror:-http://deb.debian.org/debian}"

# The base system is made once and kept: it is what a fresh machine has before the
# demo, so it is not part of the time.
if ! podman image exists "$IMAGE"; then
  if [ ! -s "$TAR" ]; then
    mmdebstrap --quiet --variant=apt --format=tar "$RELEASE" "$TAR.partial" "$mirror"
    mv "$TAR.partial" "$TAR"
  fi
  podman import --quiet "$TAR" "$IMAGE" >/dev/null
fi

WORK=$(mktemp -d /var/tmp/outbox-fresh.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
git -C "$REPO" archive HEAD | tar -x -C "$WORK"
echo "fresh-machine-demo: $RELEASE, tree $(git -C "$REPO" rev-parse --short HEAD), $(nproc) cores"
# Each output line is prefixed with the seconds since the demo started.
podman --runtime runc run --rm --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=4096:4096 \
  -v "$WORK:/src:Z" -w /src "$IMAGE" bash -c '
  start=$(date +%s)
  set -o pipefail
  deploy/local/demo.sh 2>&1 | while IFS= read -r line; do
    printf "[%4ds] %s\n" $(( $(date +%s) - start )) "$line"
  done
  rc=$?
  echo "fresh-machine-demo: demo.sh exit $rc after $(( $(date +%s) - start )) s"
  exit $rc'
