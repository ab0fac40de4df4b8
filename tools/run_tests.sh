#!/usr/bin/env bash
# The test suite: install dependencies, build, run every test with ctest (loopback only).
# ctest lists skipped tests (the GPU ones on machines without a GPU) after its summary, so the
# summary line is repeated last.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/build.sh
bash tools/install_python.sh
cd build
rc=0
ctest -j "$(nproc)" --output-on-failure --timeout 600 2>&1 | tee ctest.log || rc=$?
grep -E "tests passed|tests failed" ctest.log | tail -n 1
exit "$rc"
