#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer: a separate build in
# build-asan/ (no CUDA kernels, no perf binaries), every GoogleTest and script test, with leak
# checking and tools/sanitizers/lsan.supp (third-party allocations that live until exit).
# Any report fails the run. Extra arguments go to ctest (e.g. -R Quant).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mkdir -p build-asan
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
echo "building the ASan+UBSan suite into build-asan/ (log: build-asan/build.log)"
if ! { cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZCOLL_WERROR=ON \
         -DZCOLL_WITH_CUDA=OFF -DZCOLL_BUILD_PERF=OFF \
         -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
         -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
         -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" &&
       cmake --build build-asan -j "$(nproc)"; } >build-asan/build.log 2>&1; then
  cat build-asan/build.log
  echo "sanitizer build failed" >&2
  exit 1
fi
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$root/tools/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd build-asan
ctest -j "$(nproc)" --output-on-failure --timeout 900 "$@"
