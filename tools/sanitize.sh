#!/usr/bin/env bash
# The test suite under a sanitizer, in a separate build (no CUDA kernels, no perf binaries):
#
#   tools/sanitize.sh address [ctest args]   AddressSanitizer + UndefinedBehaviorSanitizer into
#                                            build-asan/, with leak checking and
#                                            tools/sanitizers/lsan.supp (third-party
#                                            allocations that live until exit)
#   tools/sanitize.sh thread [ctest args]    ThreadSanitizer into build-tsan/, with
#                                            tools/sanitizers/tsan.supp (races reported inside
#                                            UCX and hwloc, which are not instrumented)
#
# Any report fails the test that produced it (halt_on_error / a non-zero exit), so the run
# fails. Extra arguments go to ctest (e.g. -R Quant). The tests that cannot run under a
# sanitizer are excluded by label (tests/CMakeLists.txt: label no_<mode>, with the reason).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mode=${1:-address}
[ $# -gt 0 ] && shift
case "$mode" in
  address)
    dir=build-asan
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
    link="-fsanitize=address,undefined"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0"
    export LSAN_OPTIONS="suppressions=$root/tools/sanitizers/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    ;;
  thread)
    dir=build-tsan
    flags="-fsanitize=thread -fno-omit-frame-pointer -g"
    link="-fsanitize=thread"
    export TSAN_OPTIONS="suppressions=$root/tools/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1:print_suppressions=0"
    ;;
  *)
    echo "usage: $0 address|thread [ctest args]" >&2
    exit 2
    ;;
esac
mkdir -p "$dir"
echo "building the $mode-sanitizer suite into $dir/ (log: $dir/build.log)"
if ! { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZCOLL_WERROR=ON \
         -DZCOLL_WITH_CUDA=OFF -DZCOLL_BUILD_PERF=OFF \
         -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
         -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" &&
       cmake --build "$dir" -j "$(nproc)"; } >"$dir/build.log" 2>&1; then
  cat "$dir/build.log"
  echo "sanitizer build failed" >&2
  exit 1
fi
cd "$dir"
ctest -j "$(nproc)" --output-on-failure --timeout 900 -LE "no_$mode" "$@"
