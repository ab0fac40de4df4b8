#!/usr/bin/env bash
# The test suite: install dependencies, build, run every test with ctest (loopback only).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/build.sh
cd build
ctest -j "$(nproc)" --output-on-failure --timeout 600
