#!/usr/bin/env bash
# The whole test suite: install what is missing, build, start the local servers,
# run ctest, stop the servers this script started. Extra arguments go to ctest
# (e.g. -L pure, -R relay_).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_and_build
start_servers
step "Running the tests"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 "$@"
