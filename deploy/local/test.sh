#!/usr/bin/env bash
# The whole test suite: install what is missing, build, start the local servers,
# run ctest, stop the servers this script started. Extra arguments go to ctest
# (e.g. -L pure, -R relay_). The container image test (label image: builds the image and
# runs it with podman, many minutes) runs only when the arguments name it (-L image).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_and_build all
start_servers
step "Running the tests"
cd "$BUILD_DIR"
exclude=(-LE image)
[[ " $* " == *image* ]] && exclude=()
ctest --output-on-failure --timeout 900 "${exclude[@]}" "$@"
