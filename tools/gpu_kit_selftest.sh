#!/usr/bin/env bash
# Tests the GPU kit on a CPU machine that has the system packages (docs/GPU_KIT.md): runs
# `tools/gpu_check.sh 1 OUT` with GPU_CHECK_ALLOW_NO_GPU=1 inside a private mount namespace in which
# the system's copies of everything the pack provides are hidden (empty files and folders bound
# over the UCX, hwloc, GoogleTest and Google Benchmark headers, libraries and CMake files, and
# pkg-config), as on the lent GPU machine. The configure must then find every dependency in the
# unpacked prefix, the build must link against it and the tests must load it (LD_LIBRARY_PATH);
# the CUDA tests skip, saying why. libc, libstdc++, libudev and libnuma stay visible (the
# loader's cache would still list them).
#
#   sudo tools/gpu_kit_selftest.sh PACK OUT      (root: unshare -m and mount --bind)
#
# GPU_BUILD (default build-gpu-selftest), GPU_CHECK_TARGETS (default: the step's test binaries
# and quant_bench, the Google Benchmark user), STEP_BUDGET (default 3600: this machine builds
# slowly) pass through. Exit: gpu_check.sh's.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PACK OUT" >&2; exit 2; }
PACK=$(cd "$1" && pwd)
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "gpu_kit_selftest.sh: needs root (unshare -m, mount --bind)" >&2; exit 2; }
# The steps that cannot run here are at least parsed (tests/scripts/gpu_kit_syntax.sh does too).
for f in gpu_check.sh gpu_deps.sh gpu_nccl_step.sh gpu_nccl_tests_fetch.sh; do
  bash -n "$ROOT/tools/$f" || { echo "gpu_kit_selftest.sh: tools/$f does not parse" >&2; exit 1; }
done

export GPU_PACK=$PACK GPU_CHECK_ALLOW_NO_GPU=1
export GPU_BUILD=${GPU_BUILD:-$ROOT/build-gpu-selftest}
export GPU_CHECK_TARGETS=${GPU_CHECK_TARGETS:-quant_cuda_test reduce_cuda_test cuda_ipc_test executor_test device_path_test quant_bench}
export STEP_BUDGET=${STEP_BUDGET:-3600}
export ROOT OUT

# shellcheck disable=SC2016
exec unshare -m --propagation private bash -c '
set -euo pipefail
empty_dir=$(mktemp -d)
empty_file=$(mktemp)
hidden=0
hide() {  # bind an empty folder or file over each existing path
  local p
  for p in "$@"; do
    if [ -d "$p" ] && [ ! -L "$p" ]; then mount --bind "$empty_dir" "$p"; hidden=$((hidden + 1))
    elif [ -f "$p" ] && [ ! -L "$p" ]; then mount --bind "$empty_file" "$p"; hidden=$((hidden + 1))
    fi
  done
}
L=/usr/lib/x86_64-linux-gnu
hide /usr/include/ucp /usr/include/uct /usr/include/ucs /usr/include/ucm /usr/include/hwloc \
     /usr/include/hwloc.h /usr/include/gtest /usr/include/gmock /usr/include/benchmark \
     $L/cmake/GTest $L/cmake/benchmark $L/ucx $L/pkgconfig \
     $L/libucp.so* $L/libuct.so* $L/libucs.so* $L/libucm.so* $L/libucs_signal.so* \
     $L/libhwloc.so* $L/libgtest* $L/libgmock* $L/libbenchmark* \
     /usr/bin/pkg-config /usr/bin/pkgconf /usr/bin/x86_64-linux-gnu-pkg-config
echo "gpu_kit_selftest: $hidden system paths hidden; e.g. /usr/include/ucp has $(ls /usr/include/ucp | wc -l) entries, pkg-config: $(command -v pkg-config || echo none)"
cd "$ROOT"
exec bash tools/gpu_check.sh 1 "$OUT"
'
