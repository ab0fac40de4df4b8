# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and runs each for a
# bounded time from its seed corpus in the repository. Any crash, sanitizer report or leak
# fails the test; the input that caused it is kept under $ZCOLL_BUILD_DIR/fuzz/artifacts.
# Exit 77 (skipped) only when clang or its libFuzzer runtime is not installed
# (tools/install_deps.sh installs both). ZCOLL_FUZZ_SECONDS: seconds per target (default 15).
set -u

SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${ZCOLL_BUILD_DIR:-$SRC/build}/fuzz
SECONDS_EACH=${ZCOLL_FUZZ_SECONDS:-15}
CXX_FUZZ=${ZCOLL_FUZZ_CXX:-clang++}
CC_FUZZ=${ZCOLL_FUZZ_CC:-clang}

if ! command -v "$CXX_FUZZ" >/dev/null || ! command -v "$CC_FUZZ" >/dev/null; then
  echo "SKIP: $CXX_FUZZ not found (tools/install_deps.sh installs clang)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe/t.cc"
if ! "$CXX_FUZZ" -fsanitize=fuzzer,address,undefined "$probe/t.cc" -o "$probe/t" 2>"$probe/err"; then
  cat "$probe/err"
  echo "SKIP: $CXX_FUZZ cannot link libFuzzer (install libclang-rt-14-dev)"
  exit 77
fi

mkdir -p "$BUILD"
echo "building the fuzz targets into $BUILD (log: $BUILD/build.log)"
if ! { CC=$CC_FUZZ CXX=$CXX_FUZZ cmake -S "$SRC" -B "$BUILD" -G Ninja \
         -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_FLAGS="-O1 -g" -DZCOLL_BUILD_FUZZ=ON -DZCOLL_BUILD_TESTS=OFF \
         -DZCOLL_BUILD_PERF=OFF -DZCOLL_WITH_CUDA=OFF &&
       cmake --build "$BUILD" -j "$(nproc)" --target fuzz_hello fuzz_rank_blob fuzz_dequantize fuzz_grow_bundle; \
     } >"$BUILD/build.log" 2>&1; then
  tail -40 "$BUILD/build.log"
  echo "FAIL: the fuzz targets do not build"
  exit 1
fi

FAILED=0
mkdir -p "$BUILD/artifacts"
for target in hello rank_blob dequantize grow_bundle; do
  work="$probe/corpus_$target"  # new inputs land here; the seeds in the repo stay as they are
  mkdir -p "$work"
  log="$BUILD/fuzz_$target.log"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$BUILD/tests/fuzz/fuzz_$target" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
    -artifact_prefix="$BUILD/artifacts/$target-" "$work" "$SRC/tests/fuzz/corpus/$target" \
    >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  if [ $rc -ne 0 ]; then
    grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -20
    echo "FAIL: fuzz_$target (exit $rc, log $log)"
    FAILED=1
  else
    echo "ok: fuzz_$target: ${execs:-?} inputs in ${SECONDS_EACH} s, no crash"
  fi
done
[ $FAILED -eq 0 ] && echo "fuzz tests passed"
exit $FAILED
