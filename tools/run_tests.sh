#!/usr/bin/env bash
# The test suite: install dependencies, build, run every test with ctest (loopback only), then
# the same suite under AddressSanitizer + UndefinedBehaviorSanitizer and under ThreadSanitizer
# (separate builds, tools/sanitize.sh). ZCOLL_TEST_SANITIZERS picks the sanitizer runs
# (default "address thread"; "" for none). Every run's summary is printed at the end, the main
# suite's last; the exit code is non-zero if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/build.sh
bash tools/install_python.sh
bash tools/build.sh  # again, incremental: the jax installed above adds libzcoll_jax.so and ctest jax.*
rc=0
(cd build && ctest -j "$(nproc)" --output-on-failure --timeout 600 2>&1 | tee ctest.log) || rc=$?
summaries=()
for mode in ${ZCOLL_TEST_SANITIZERS-address thread}; do
  log="build/sanitize-$mode.log"
  echo "== the suite under the $mode sanitizer (log: $log)"
  if bash tools/sanitize.sh "$mode" >"$log" 2>&1; then
    summaries+=("$mode sanitizer: $(grep -E "tests passed|tests failed" "$log" | tail -n 1)")
  else
    rc=1
    grep -E "\(Failed\)|\(Timeout\)|\(SEGFAULT\)|ERROR: |runtime error|WARNING: ThreadSanitizer" "$log" | head -40 || true
    echo "-- what the failed tests reported:"
    grep -E -A10 ": Failure$|^FAIL: " "$log" | head -80 || true
    summaries+=("$mode sanitizer: FAILED ($(grep -E "tests passed|tests failed|build failed" "$log" | tail -n 1))")
  fi
done
if grep -qE ", [1-9][0-9]* tests failed" build/ctest.log; then
  echo "-- what the failed tests of the main suite reported:"
  grep -E -A10 ": Failure$|^FAIL: " build/ctest.log | head -80 || true
fi
for s in "${summaries[@]}"; do echo "$s"; done
grep -E "tests passed|tests failed" build/ctest.log | tail -n 1
exit "$rc"
