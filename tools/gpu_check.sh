#!/usr/bin/env bash
# The GPU kit's running half (docs/GPU_KIT.md): on a machine with a GPU but without UCX, hwloc,
# GoogleTest, Google Benchmark, pkg-config or a package registry (the lent machine), unpacks the
# .debs of tools/gpu_deps.sh into a prefix (dpkg -x), configures and builds zcoll against it, and
# runs ONE step, in under 8 minutes, writing its results into OUT as it goes (a step killed at its
# limit still leaves what it did):
#
#   tools/gpu_check.sh STEP OUT
#     1  configure + build (CUDA for sm_90 unless CUDA_ARCH says), then quant_cuda_test,
#        reduce_cuda_test, cuda_ipc_test (a copy waiting for a call's fence, a host-only job in a
#        child process leaving no CUDA context), executor_test (CudaExecutorTest.*) and
#        device_path_test (CudaDevicePath.*: every call on CUDA buffers, ranks as threads), in
#        the default mode (sync on CUDA) and with ZCOLL_DEVICE_CALLS=async
#     2  the multi-process device checks (tests/scripts/device_processes.sh), the same program
#        with ZCOLL_DEVICE_CALLS=stream (stream_mode.txt), the launch queue
#        depth probe (tools/gpu_probe.cu queue) and issue 38's hold probes (gpu_probe held with
#        CUDA_DEVICE_MAX_CONNECTIONS unset, 8 and 32; gpu_probe blocked): hold_probe.txt
#     3  a device-to-device copy bound (tools/gpu_probe.cu d2d), then perf/peers/device.sh: the perf
#        binaries with --device 1 against NCCL (PyTorch's nvidia-nccl wheel when python3 has it),
#        two ranks on one GPU
#     4  the torch backend's CUDA tests (python/tests/test_backend_cuda.py), built against the
#        torch that python3 imports
#     5  libzcoll_nccl.so under unmodified NCCL programs: torch's "nccl" backend over it
#        (LD_PRELOAD), 2 processes on the GPU (tools/gpu_nccl_torch.py: all_reduce,
#        all_gather_into_tensor, reduce_scatter_tensor, FSDP2), the same run on torch's NCCL for
#        comparison; then NVIDIA's nccl-tests (carried in .gpu_carry/nccl-tests by
#        tools/gpu_nccl_tests_fetch.sh) built against it, every binary's #wrong 0
#
# OUT gets summary.txt (one line per check: PASS / FAIL / SKIP and why, written as each ends),
# stepN.log (everything, streamed) and the step's result files (step 2: queue_probe.txt; step 3:
# d2d.txt, device.md; step 5: nccl_torch.txt, nccl_tests.txt). Every step builds first when the build is missing (a fresh machine), so
# any step can run alone; on a warm machine the build is reused.
#
# Environment:
#   GPU_PACK    the folder of .debs (default: build-gpu-pack/, else build*/gpu-pack/ with a MANIFEST)
#   GPU_BUILD   the build folder (default build-gpu/); the prefix goes to GPU_BUILD/deps
#   CUDA_ARCH   CMAKE_CUDA_ARCHITECTURES (default 90: H100 and H200)
#   STEP_BUDGET seconds for the whole step (default 470, under the 8 minutes asked)
#   GPU_CHECK_TARGETS  build only these targets (default: all; for a short step 1 under the
#               device tool's 15 minutes: "quant_cuda_test reduce_cuda_test cuda_ipc_test
#               executor_test device_path_test")
#   NCCL_TESTS_SRC  step 5's nccl-tests source (default .gpu_carry/nccl-tests)
#   GPU_CHECK_ALLOW_NO_GPU=1  run step 1 without a GPU (the CUDA tests skip; to test the kit
#               itself on a CPU machine); otherwise a step without a GPU exits 3 saying so
# Exit: 0 every check of the step passed; 1 a check failed; 2 usage; 3 the step cannot run here
# (no GPU, no pack, no nvcc, ...: the first line of summary.txt says why); 124 out of time.
set -uo pipefail

usage() {
  echo "usage: $0 1|2|3|4|5 OUT   (see the header of this script, docs/GPU_KIT.md)" >&2
  exit 2
}
[ $# -eq 2 ] || usage
STEP=$1
case "$STEP" in 1 | 2 | 3 | 4 | 5) ;; *) usage ;; esac
mkdir -p "$2" || exit 2
OUT=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2

START=$SECONDS
BUDGET=${STEP_BUDGET:-470}
LOG=$OUT/step$STEP.log
SUMMARY=$OUT/summary.txt
: >>"$SUMMARY"
FAILED=0

log() { echo "gpu_check: $*" | tee -a "$LOG" >&2; }
result() {  # result PASS|FAIL|SKIP NAME WHY...
  local status=$1 name=$2
  shift 2
  printf 'step %s %-4s %s%s\n' "$STEP" "$status" "$name" "${*:+: $*}" | tee -a "$SUMMARY" "$LOG" >&2
  [ "$status" = FAIL ] && FAILED=1
  return 0
}
# cannot WHY: the step cannot run here; says why and exits 3.
cannot() {
  result FAIL "step $STEP" "cannot run: $*"
  exit 3
}
left() { echo $((BUDGET - (SECONDS - START))); }
# timed NAME SECONDS_WANTED CMD...: runs CMD with its output in the log, within what is left of
# the budget (less 15 s for the rest); returns its exit code, 124 when cut.
timed() {
  local name=$1 want=$2 t
  shift 2
  t=$(left)
  t=$((t - 15))
  [ "$want" -gt 0 ] && [ "$want" -lt "$t" ] && t=$want
  if [ "$t" -le 5 ]; then
    log "$name: no time left in the step budget (${BUDGET}s)"
    return 124
  fi
  log "$name (limit ${t}s): $*"
  timeout --kill-after=5 "$t" "$@" >>"$LOG" 2>&1
}

TREE="(not a git checkout)"
if HEAD_ID=$(git rev-parse --short HEAD 2>/dev/null); then
  TREE=$HEAD_ID
  git diff --quiet HEAD 2>/dev/null || TREE="$TREE + local changes"
fi
log "step $STEP on $(hostname), $(date -u +%FT%TZ), tree $TREE"

# ---- The GPU --------------------------------------------------------------------------------
GPU=
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
        head -n 1)
fi
[ -z "$GPU" ] && compgen -G '/dev/nvidia[0-9]*' >/dev/null && GPU="(a /dev/nvidia device)"
if [ -n "$GPU" ]; then
  log "GPU: $GPU"
elif [ "$STEP" = 1 ] && [ "${GPU_CHECK_ALLOW_NO_GPU:-0}" = 1 ]; then
  log "no GPU (GPU_CHECK_ALLOW_NO_GPU=1): building and running step 1; its CUDA tests will skip"
else
  cannot "no GPU here (nvidia-smi lists none, no /dev/nvidia*); the kit's steps need one" \
         "(GPU_CHECK_ALLOW_NO_GPU=1 runs step 1 anyway, its CUDA tests skipping)"
fi

# ---- The dependencies: .debs -> prefix ----------------------------------------------------------
PACK=${GPU_PACK:-}
if [ -z "$PACK" ]; then
  for d in build-gpu-pack build*/gpu-pack; do
    [ -f "$d/MANIFEST" ] && { PACK=$d; break; }
  done
fi
{ [ -n "$PACK" ] && [ -f "$PACK/MANIFEST" ]; } ||
  cannot "no pack of .debs (GPU_PACK, build-gpu-pack/ or build*/gpu-pack/ with a MANIFEST):" \
         "run tools/gpu_deps.sh pack build-gpu-pack on a Debian 12 machine and carry it"
PACK=$(cd "$PACK" && pwd)
BUILD=${GPU_BUILD:-build-gpu}
mkdir -p "$BUILD" || cannot "cannot create $BUILD"
BUILD=$(cd "$BUILD" && pwd)
PREFIX=$BUILD/deps
ARCHLIB=usr/lib/x86_64-linux-gnu

# Unpacked once per pack (its MANIFEST is the stamp); dpkg -x, or ar + tar where dpkg is missing.
if ! cmp -s "$PACK/MANIFEST" "$PREFIX/.manifest" 2>/dev/null; then
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  while IFS=$'\t' read -r pkg _ _ file; do
    [ -f "$PACK/$file" ] || cannot "the pack lacks $file ($pkg) named in its MANIFEST"
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$PACK/$file" "$PREFIX" || cannot "dpkg-deb -x $file failed"
    else
      member=$(ar t "$PACK/$file" | grep '^data\.tar') || cannot "no data.tar in $file"
      ar p "$PACK/$file" "$member" | tar -x -a -f - -C "$PREFIX" 2>/dev/null ||
        { case $member in
            *.xz) ar p "$PACK/$file" "$member" | tar -xJ -C "$PREFIX" ;;
            *.zst) ar p "$PACK/$file" "$member" | zstd -dc | tar -x -C "$PREFIX" ;;
            *.gz) ar p "$PACK/$file" "$member" | tar -xz -C "$PREFIX" ;;
            *) false ;;
          esac; } || cannot "cannot unpack $file (no dpkg-deb; ar/tar/$member)"
    fi
  done <"$PACK/MANIFEST"
  # libudev and libnuma: the machine's own when it has them (they belong with its kernel/udev);
  # the pack's only as a fallback.
  mkdir -p "$PREFIX/fallback"
  mv "$PREFIX/$ARCHLIB"/libudev.so.1* "$PREFIX/$ARCHLIB"/libnuma.so.1* "$PREFIX/fallback/" 2>/dev/null
  # The -dev symlinks point at /usr/lib/...: make them relative to the prefix.
  for l in "$PREFIX/$ARCHLIB"/*.so; do
    [ -L "$l" ] || continue
    t=$(readlink "$l")
    case $t in /*) ln -sfn "$(basename "$t")" "$l" ;; esac
  done
  cp "$PACK/MANIFEST" "$PREFIX/.manifest"
  log "unpacked $(wc -l <"$PACK/MANIFEST") packages from $PACK into $PREFIX"
fi

LIBPATH=$PREFIX/$ARCHLIB
for lib in libudev.so.1 libnuma.so.1; do
  if ! { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q "^[[:space:]]*$lib "; then
    LIBPATH=$LIBPATH:$PREFIX/fallback
    log "$lib: not on this machine, the pack's is used"
    break
  fi
done
export LD_LIBRARY_PATH=$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Only the prefix's .pc files, their /usr paths under the prefix, nothing filtered as a system
# directory (the prefix's /usr/include is not this machine's).
export PKG_CONFIG_LIBDIR=$PREFIX/$ARCHLIB/pkgconfig:$PREFIX/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$PREFIX
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
unset PKG_CONFIG_PATH
export UCX_MODULE_DIR=$PREFIX/$ARCHLIB/ucx
PKGCONF=$PREFIX/usr/bin/pkgconf
"$PKGCONF" --version >/dev/null 2>&1 || cannot "the pack's pkgconf does not run here ($PKGCONF)"
for m in hwloc ucx; do
  "$PKGCONF" --exists "$m" || cannot "pkgconf finds no $m.pc in the prefix"
done

# ---- Configure + build ------------------------------------------------------------------------
command -v cmake >/dev/null || cannot "no cmake"
NVCC=
for c in "${CUDACXX:-}" /usr/local/cuda/bin/nvcc "$(command -v nvcc 2>/dev/null)"; do
  [ -n "$c" ] && [ -x "$c" ] && { NVCC=$c; break; }
done
[ -n "$NVCC" ] || cannot "no nvcc (/usr/local/cuda/bin/nvcc, CUDACXX or PATH)"

# NCCL for perf/peers/nccl_coll_bench: PyTorch's wheel (nvidia-nccl-cu*) when python3 has it,
# linked through a folder of its own (the wheel has libnccl.so.2 only, no libnccl.so).
NCCL_WHEEL=$(python3 - 2>/dev/null <<'EOF'
import os
import nvidia.nccl
for p in nvidia.nccl.__path__:
    if os.path.exists(os.path.join(p, "lib", "libnccl.so.2")) and \
       os.path.exists(os.path.join(p, "include", "nccl.h")):
        print(p)
        break
EOF
) || NCCL_WHEEL=
NCCL_ARGS=()
if [ -n "$NCCL_WHEEL" ]; then
  mkdir -p "$BUILD/nccl/lib"
  ln -sfn "$NCCL_WHEEL/include" "$BUILD/nccl/include"
  ln -sfn "$NCCL_WHEEL/lib/libnccl.so.2" "$BUILD/nccl/lib/libnccl.so"
  NCCL_ARGS=(-DNCCL_ROOT="$BUILD/nccl")
fi

configure_and_build() {
  local gen=() rc
  command -v ninja >/dev/null && gen=(-G Ninja)
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    timed "configure" 120 cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DZCOLL_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
      -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
      -DGTest_DIR="$PREFIX/$ARCHLIB/cmake/GTest" \
      -Dbenchmark_DIR="$PREFIX/$ARCHLIB/cmake/benchmark" \
      -DPKG_CONFIG_EXECUTABLE="$PKGCONF" \
      -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$PREFIX/$ARCHLIB:$PREFIX/fallback" \
      -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$PREFIX/$ARCHLIB:$PREFIX/fallback" \
      "${NCCL_ARGS[@]}"
    rc=$?
    if [ $rc -ne 0 ]; then
      rm -f "$BUILD/CMakeCache.txt"
      [ $rc = 124 ] && { result FAIL configure "out of time"; exit 124; }
      result FAIL configure "cmake failed (exit $rc): $(grep -m1 -E 'Error|error' "$LOG" | cut -c1-200)"
      exit 1
    fi
    # Every dependency from the prefix, none from the system.
    local strays
    strays=$(grep -E '^(HWLOC|UCX|GTest|benchmark|PKG_CONFIG)[A-Za-z_]*(:[A-Z]+)?=' \
             "$BUILD/CMakeCache.txt" | grep -E '=/usr/(lib|include|bin)' | grep -v "$PREFIX" || true)
    [ -z "$strays" ] || log "warning: dependencies found outside the prefix: $strays"
    result PASS configure "deps from $PREFIX (hwloc $("$PKGCONF" --modversion hwloc)," \
      "ucx $("$PKGCONF" --modversion ucx)); nccl_coll_bench against" \
      "${NCCL_WHEEL:-the NCCL CMake finds (no PyTorch NCCL wheel)}"
  fi
  # shellcheck disable=SC2086
  timed "build" 0 cmake --build "$BUILD" -j "$(nproc)" ${GPU_CHECK_TARGETS:+--target $GPU_CHECK_TARGETS}
  rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc = 124 ] && { result FAIL build "out of time (a later call continues it)"; exit 124; }
    result FAIL build "exit $rc: $(grep -m1 -E 'error|Error' "$LOG" | cut -c1-200)"
    exit 1
  fi
  result PASS build "$BUILD"
}

# gtest NAME BINARY [FILTER]: runs a GoogleTest binary of the build. On a GPU machine a test that
# skips for want of a device or of CUDA in the build is a failure of the check (skips for other
# reasons, e.g. "a device is present", are expected); without a GPU (GPU_CHECK_ALLOW_NO_GPU=1)
# such skips are reported as SKIP with their reason.
gtest() {
  local name=$1 bin=$BUILD/tests/$2 filter=${3:-*} rc out before passed skipped nodev why
  before=$(wc -l <"$LOG")
  timed "$name" 300 "$bin" --gtest_filter="$filter"
  rc=$?
  out=$(mktemp)
  tail -n +"$((before + 1))" "$LOG" >"$out"
  passed=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$out" | grep -oE '[0-9]+' | head -n 1)
  skipped=$(grep -E '^\[  SKIPPED \] [0-9]+ test' "$out" | grep -oE '[0-9]+' | head -n 1)
  nodev=$(grep -cE '^(no CUDA device|zcoll built without CUDA)' "$out")
  why=$(grep -m1 -E '^(no CUDA device|zcoll built without CUDA)' "$out" | cut -c1-160)
  rm -f "$out"
  if [ $rc -ne 0 ]; then
    result FAIL "$name" "exit $rc$([ $rc = 124 ] && echo ' (out of time)'); see step$STEP.log"
  elif [ "${passed:-0}" = 0 ] && [ "${skipped:-0}" = 0 ]; then
    result FAIL "$name" "no test matched --gtest_filter=$filter"
  elif [ "$nodev" -gt 0 ] && [ -n "$GPU" ]; then
    result FAIL "$name" "${passed:-0} passed, $nodev skipped on a GPU machine: $why"
  elif [ "$nodev" -gt 0 ]; then
    result SKIP "$name" "${passed:-0} passed, $nodev skipped: $why"
  else
    result PASS "$name" "${passed:-0} passed${skipped:+, $skipped skipped (not for want of a device)}"
  fi
}

if [ "$STEP" = 1 ] || [ ! -x "$BUILD/tests/quant_cuda_test" ] || [ ! -x "$BUILD/perf/all_gather_perf" ]; then
  configure_and_build
fi

case "$STEP" in
  1)
    gtest quant_cuda_test quant_cuda_test
    gtest reduce_cuda_test reduce_cuda_test
    gtest cuda_ipc_test cuda_ipc_test
    gtest "executor_test CudaExecutorTest.*" executor_test '*CudaExecutorTest.*'
    # Both modes: the default on CUDA (auto: calls return complete, no stream wait) and the
    # queued one (async), which has not run on a GPU (issue 38).
    gtest "device_path_test CudaDevicePath.* (default: sync on CUDA)" device_path_test \
      '*CudaDevicePath.*'
    ZCOLL_DEVICE_CALLS=async gtest "device_path_test CudaDevicePath.* (ZCOLL_DEVICE_CALLS=async)" \
      device_path_test '*CudaDevicePath.*'
    ;;
  2)
    timed "device_processes.sh" 300 env ZCOLL_BUILD_DIR="$BUILD" ZCOLL_SOURCE_DIR="$ROOT" \
      bash tests/scripts/device_processes.sh
    rc=$?
    case $rc in
      0) result PASS device_processes.sh "-n 2, -n 4, -n 4 --nodes 2, a leaving rank" ;;
      77) result FAIL device_processes.sh "skipped: $(grep -m1 'SKIP' "$LOG")" ;;
      *) result FAIL device_processes.sh "exit $rc: $(grep -m1 '^FAIL' "$LOG" | cut -c1-200)" ;;
    esac
    # Issue 38's stream-triggered model (ZCOLL_DEVICE_CALLS=stream), zcoll_device_check's
    # every call on CUDA buffers against the host bytes, every rank saying the ring is on:
    # stream_check NAME RANKS LIMIT_S [zcollrun options].
    stream_check() {
      local name=$1 n=$2 limit=$3
      shift 3
      timed "stream mode ($name)" "$limit" env ZCOLL_DEVICE_CALLS=stream ZCOLL_DEBUG=INFO \
        ZCOLL_DEBUG_SUBSYS=INIT python3 tools/zcollrun --timeout $((limit - 20)) -n "$n" "$@" \
        "$BUILD/tests/zcoll_device_check" >"$OUT/$name.txt" 2>&1
      local rc=$? on
      on=$(grep -c "stream-triggered device calls on" "$OUT/$name.txt")
      if [ "$rc" = 0 ] && [ "$on" -ge "$n" ]; then
        result PASS "$name" "-n $n $* on one GPU, every call equal to the host's, ring on"
      else
        result FAIL "$name" "exit $rc, ring on in $on of $n ranks; see $name.txt"
      fi
    }
    # 2 processes on the GPU (one node); then 4 over 2 emulated nodes (gathers, hpZ and
    # reductions through the proxy; qgZ and the quantizing all-reduce synchronous).
    stream_check stream_mode 2 120
    stream_check stream_nodes 4 150 --nodes 2
    # The same calls captured into CUDA graphs, each launched twice (issue 38: stream-triggered
    # calls are captured, the others refused before anything is recorded).
    timed "stream mode, graphs" 120 env ZCOLL_DEVICE_CALLS=stream \
      python3 tools/zcollrun --timeout 100 -n 2 "$BUILD/tests/zcoll_device_check" --graph \
      >"$OUT/graph_mode.txt" 2>&1
    rc=$?
    captured=$(grep -m1 "calls captured into graphs" "$OUT/graph_mode.txt" | cut -c1-120)
    if [ "$rc" = 0 ] && grep -q "rank 0: [1-9][0-9]* of [0-9]* calls captured" "$OUT/graph_mode.txt"; then
      result PASS graph_mode "-n 2 on one GPU, captured calls' second launch equal to the host's ($captured)"
    else
      result FAIL graph_mode "exit $rc ($captured); see graph_mode.txt"
    fi
    timed "build gpu_probe" 120 "$NVCC" -O2 -arch=sm_"${CUDA_ARCH:-90}" -o "$BUILD/gpu_probe" \
      tools/gpu_probe.cu || { result FAIL queue_probe "nvcc tools/gpu_probe.cu failed"; exit 1; }
    {
      timed "queue probe" 60 "$BUILD/gpu_probe" queue
      echo "$?" >"$BUILD/.rc1"
      timed "queue probe, one connection" 60 env CUDA_DEVICE_MAX_CONNECTIONS=1 "$BUILD/gpu_probe" queue
      echo "$?" >"$BUILD/.rc2"
    }
    grep -E '^(device 0|queue )' "$LOG" >"$OUT/queue_probe.txt"
    if [ "$(cat "$BUILD/.rc1")" = 0 ] && [ "$(cat "$BUILD/.rc2")" = 0 ]; then
      result PASS queue_probe "$(grep -m1 'queue kernel' "$OUT/queue_probe.txt" | sed 's/.*: depth/depth/')"
    else
      result FAIL queue_probe "exit $(cat "$BUILD/.rc1") / $(cat "$BUILD/.rc2"); see queue_probe.txt"
    fi
    # Issue 38's questions: which new streams run while one is held by a stream memory wait
    # (hardware queues shared), and which calls wait behind such a hold. Measurements, not
    # checks: each prints its verdicts as it goes into hold_probe.txt.
    hold_rc=0
    for conn in unset 8 32; do
      if [ "$conn" = unset ]; then
        timed "held-stream probe" 60 env -u CUDA_DEVICE_MAX_CONNECTIONS "$BUILD/gpu_probe" held ||
          hold_rc=$?
      else
        timed "held-stream probe, $conn connections" 60 env CUDA_DEVICE_MAX_CONNECTIONS="$conn" \
          "$BUILD/gpu_probe" held || hold_rc=$?
      fi
    done
    timed "blocked-call probe" 60 "$BUILD/gpu_probe" blocked || hold_rc=$?
    grep -E '^(device 0|held |blocked )' "$LOG" >"$OUT/hold_probe.txt"
    if [ "$hold_rc" = 0 ]; then
      result PASS hold_probe "$(grep -c '' "$OUT/hold_probe.txt") lines in hold_probe.txt"
    else
      result FAIL hold_probe "exit $hold_rc; see hold_probe.txt and step$STEP.log"
    fi
    ;;
  3)
    [ -x "$BUILD/gpu_probe" ] ||
      timed "build gpu_probe" 120 "$NVCC" -O2 -arch=sm_"${CUDA_ARCH:-90}" -o "$BUILD/gpu_probe" \
        tools/gpu_probe.cu
    timed "d2d copy bound" 60 "$BUILD/gpu_probe" d2d
    rc=$?
    grep -E '^(device 0|d2d )' "$LOG" >"$OUT/d2d.txt"
    if [ $rc = 0 ]; then result PASS d2d "$(tail -n 1 "$OUT/d2d.txt")"; else result FAIL d2d "exit $rc"; fi
    [ -x "$BUILD/perf/nccl_coll_bench" ] ||
      log "no nccl_coll_bench (no NCCL from PyTorch's wheel or the toolkit): device.sh lists NCCL as missing"
    # Smaller than device.sh's defaults, to fit the step's time: 1 MiB .. MAX, x2.
    timed "perf/peers/device.sh" 0 env ZCOLL_BUILD_DIR="$BUILD" MAX="${MAX:-64M}" \
      ITERS="${ITERS:-10}" WARMUP="${WARMUP:-2}" bash perf/peers/device.sh "$OUT/device.md"
    rc=$?
    case $rc in
      0) result PASS device.sh "see device.md" ;;
      124) result FAIL device.sh "out of time (MAX=${MAX:-64M}; lower MAX or ITERS)" ;;
      *) result FAIL device.sh "exit $rc; failures listed at the end of device.md" ;;
    esac
    ;;
  4)
    ver=$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>>"$LOG") ||
      cannot "python3 cannot import torch"
    log "torch $ver"
    python3 -c 'import setuptools' 2>/dev/null || cannot "python3 has no setuptools (needed to build the extension)"
    python3 -m pytest --version >/dev/null 2>&1 || cannot "python3 has no pytest"
    # Built in place in this tree (python/zcoll/_C*.so, libzcoll.so next to it), not installed.
    (cd python && timed "build the torch extension" 300 env ZCOLL_BUILD_DIR="$BUILD" \
       python3 setup.py build_ext --inplace)
    rc=$?
    [ $rc = 0 ] || { result FAIL "torch extension" "build failed (exit $rc): $(grep -m1 -E 'error' "$LOG" | cut -c1-200)"; exit 1; }
    result PASS "torch extension" "built against torch $ver"
    timed "test_backend_cuda.py" 0 env PYTHONPATH="$ROOT/python" python3 -m pytest -q -rs \
      python/tests/test_backend_cuda.py
    rc=$?
    summary=$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$LOG" | tail -n 1)
    if [ $rc = 0 ] && ! echo "$summary" | grep -q skipped; then
      result PASS test_backend_cuda.py "$summary"
    else
      result FAIL test_backend_cuda.py "exit $rc: $summary $(grep -m1 'SKIPPED' "$LOG" | cut -c1-200)"
    fi
    ;;
  5)
    # shellcheck source=tools/gpu_nccl_step.sh
    source tools/gpu_nccl_step.sh
    ;;
esac

log "step $STEP done in $((SECONDS - START)) s"
exit $FAILED
