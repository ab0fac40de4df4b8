# The GPU kit's step 5 (docs/GPU_KIT.md), sourced by tools/gpu_check.sh after its build: it uses
# that script's BUILD, OUT, LOG, ROOT, NVCC, NCCL_WHEEL and its log/result/timed/cannot helpers.
#
# libzcoll_nccl.so under programs written for NCCL, unmodified, on one GPU:
#  1. torch's "nccl" backend, 2 processes on cuda:0 (tools/gpu_nccl_torch.py): all_reduce,
#     all_gather_into_tensor, reduce_scatter_tensor, FSDP2 against one process; over zcoll by
#     LD_PRELOAD and by LD_AUDIT (each check must pass), then on torch's own NCCL, each rank
#     with an NCCL_HOSTID of its own (NCCL refuses two ranks on one GPU of one host, "Duplicate
#     GPU detected") over its socket transport: the same checks, and FSDP2's final parameters of
#     the zcoll and NCCL runs compared (max |difference|, reported; both are within 1e-5 of one
#     process by their own checks). An NCCL run that fails is a SKIP: the comparison is the point.
#  2. NVIDIA's nccl-tests from NCCL_TESTS_SRC (default .gpu_carry/nccl-tests, put there by
#     tools/gpu_nccl_tests_fetch.sh and carried), built with NCCL_HOME pointing at
#     libzcoll_nccl.so and the nccl.h it was built against; every *_perf binary runs 8 B..32 MiB
#     with -c 1 (data checked) and must exit 0 with every #wrong 0 and "Out of bounds values : 0".
#     Two passes: 1 rank (-g 1), then 2 ranks as threads (-t 2 -g 1 -p 1). Without MPI,
#     nccl-tests puts in-process rank i on device gpu0 + i; the second pass runs under
#     tools/gpu_one_gpu_as_many.c (LD_PRELOAD), which shows the one GPU as two to nccl-tests.
# GPU_NCCL_PARTS (default "torch nccl-tests") runs only the parts named, e.g. one per call when
# the two do not fit one call's budget. Result files: OUT/nccl_torch.txt, OUT/nccl_tests.txt.

NCCL_LIB=$BUILD/nccl/libzcoll_nccl.so
NCCL_AUDIT=$BUILD/nccl/libzcoll_nccl_audit.so

# The library needs nccl.h: the toolkit's, else the PyTorch NCCL wheel's (NCCL_INCLUDE_DIR).
if grep -q '^ZCOLL_NCCL_H:PATH=.*NOTFOUND' "$BUILD/CMakeCache.txt" && [ -n "$NCCL_WHEEL" ]; then
  timed "configure with the wheel's nccl.h" 120 cmake -S "$ROOT" -B "$BUILD" \
    -DNCCL_INCLUDE_DIR="$NCCL_WHEEL/include" -UZCOLL_NCCL_H
fi
timed "build libzcoll_nccl.so" 0 cmake --build "$BUILD" --target zcoll_nccl zcoll_nccl_audit ||
  cannot "libzcoll_nccl.so did not build (see step5.log)"
[ -f "$NCCL_LIB" ] || cannot "no $NCCL_LIB: the configure found no nccl.h (ZCOLL_NCCL_H in $BUILD/CMakeCache.txt)"
NCCL_H_DIR=$(sed -n 's/^ZCOLL_NCCL_H:PATH=//p' "$BUILD/CMakeCache.txt")
log "libzcoll_nccl.so built against $NCCL_H_DIR/nccl.h"

PARTS=${GPU_NCCL_PARTS:-torch nccl-tests}

# ---- 1. torch ------------------------------------------------------------------------------
# torch_run LABEL ENV... [-- ARGS...]: tools/gpu_nccl_torch.py ARGS under ENV; its lines go to
# nccl_torch.txt.
torch_run() {
  local label=$1 before rc envs=() args=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  before=$(wc -l <"$LOG")
  timed "torch nccl backend, $label" 300 env "${envs[@]}" PYTHONUNBUFFERED=1 \
    python3 tools/gpu_nccl_torch.py "${args[@]}"
  rc=$?
  { echo "## $label (exit $rc)"; tail -n +"$((before + 1))" "$LOG" | grep -E '^(PASS|FAIL|INFO|SKIP)'; } \
    >>"$OUT/nccl_torch.txt"
  return $rc
}
if [[ " $PARTS " != *" torch "* ]]; then
  log "torch part skipped (GPU_NCCL_PARTS=$PARTS)"
elif ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>>"$LOG"; then
  result FAIL "torch nccl backend" "python3 has no torch with CUDA here"
else
  : >"$OUT/nccl_torch.txt"
  for way in "LD_PRELOAD=$NCCL_LIB" "LD_AUDIT=$NCCL_AUDIT"; do
    label="over zcoll (${way%%=*})"
    torch_run "$label" "$way" ZCOLL_NCCL_AUDIT_DEBUG=1 -- --save "$BUILD/fsdp2_${way%%=*}.pt"
    rc=$?
    passed=$(sed -n "/^## $label/,/^## /p" "$OUT/nccl_torch.txt" | grep -c '^PASS')
    failed=$(sed -n "/^## $label/,/^## /p" "$OUT/nccl_torch.txt" | grep '^FAIL' | head -n 3 | tr '\n' ' ')
    zcoll_mapped=$(sed -n "/^## $label/,/^## /p" "$OUT/nccl_torch.txt" | grep -c 'INFO.*libzcoll_nccl.so')
    if [ $rc = 0 ] && [ "$zcoll_mapped" = 2 ]; then
      result PASS "torch $label" "$passed checks passed on both ranks; see nccl_torch.txt"
    else
      result FAIL "torch $label" "exit $rc, $zcoll_mapped of 2 ranks mapped libzcoll_nccl.so: ${failed:-see nccl_torch.txt}"
    fi
  done
  torch_run "on torch's own NCCL" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
    -- --nccl-hostid --save "$BUILD/fsdp2_nccl.pt"
  rc=$?
  if [ $rc = 0 ]; then
    diff=$(python3 -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
print(max((x - y).abs().max().item() for x, y in zip(a, b)))' "$BUILD/fsdp2_LD_PRELOAD.pt" "$BUILD/fsdp2_nccl.pt" 2>>"$LOG")
    result PASS "torch on its own NCCL" "the same checks passed; FSDP2's parameters, zcoll vs NCCL: max difference ${diff:-(not compared)}"
  else
    result SKIP "torch on its own NCCL" "$(grep -A3 "^## on torch's own NCCL" "$OUT/nccl_torch.txt" |
      grep -m1 '^FAIL' | cut -c1-200) (NCCL refuses 2 ranks on one GPU)"
  fi
fi

# ---- 2. nccl-tests -------------------------------------------------------------------------
# nccl_tests_pass LABEL ARGS... [-- ENV...]: every built *_perf binary with ARGS, 8 B..32 MiB,
# data checked; one result line for the pass.
nccl_tests_pass() {
  local label=$1 args=() envs=() ok=0 bad="" bin name rc before wrong lines total
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  envs=("$@")
  for bin in $bins; do
    name=$(basename "$bin")
    before=$(wc -l <"$LOG")
    timed "$name ($label)" 90 env "${envs[@]}" "$bin" "${args[@]}" -b 8 -e 32M -f 8 -c 1 -w 1 -n 3
    rc=$?
    tail -n +"$((before + 1))" "$LOG" | grep -vE '^gpu_check:' >"$OUT/$name.out"
    { echo "## $name, $label (exit $rc)"; cat "$OUT/$name.out"; } >>"$OUT/nccl_tests.txt"
    # Data lines: size count type redop root, then time algbw busbw #wrong, out of place and in place.
    wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 && ($9 != "0" || $13 != "0") {n++} END {print n + 0}' "$OUT/$name.out")
    lines=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {n++} END {print n + 0}' "$OUT/$name.out")
    if [ $rc = 0 ] && [ "$wrong" = 0 ] && [ "$lines" -gt 0 ] &&
       grep -q 'Out of bounds values : 0 OK' "$OUT/$name.out"; then
      ok=$((ok + 1))
    else
      bad="$bad $name(exit $rc, $wrong of $lines sizes wrong)"
    fi
    rm -f "$OUT/$name.out"
  done
  total=$(echo "$bins" | wc -l)
  if [ -z "$bad" ]; then
    result PASS "nccl-tests, $label" "all $total binaries: #wrong 0 at every size; see nccl_tests.txt"
  else
    result FAIL "nccl-tests, $label" "$ok of $total clean;$bad"
  fi
}
SRC=${NCCL_TESTS_SRC:-$ROOT/.gpu_carry/nccl-tests}
if [[ " $PARTS " != *" nccl-tests "* ]]; then
  log "nccl-tests part skipped (GPU_NCCL_PARTS=$PARTS)"
elif [ ! -f "$SRC/src/common.cu" ]; then
  result FAIL nccl-tests "no source at $SRC: run tools/gpu_nccl_tests_fetch.sh here and carry .gpu_carry"
else
  HOME_DIR=$BUILD/nccl-zcoll
  mkdir -p "$HOME_DIR/include" "$HOME_DIR/lib"
  ln -sfn "$NCCL_H_DIR/nccl.h" "$HOME_DIR/include/nccl.h"
  ln -sfn "$NCCL_LIB" "$HOME_DIR/lib/libnccl.so"
  ln -sfn "$NCCL_LIB" "$HOME_DIR/lib/libnccl.so.2"
  rc=0
  # Built once per source (its ORIGIN file is the stamp); a warm machine's next call reuses it.
  if ! ls "$BUILD"/nccl-tests/*_perf >/dev/null 2>&1 ||
     ! cmp -s "$SRC/ORIGIN" "$BUILD/nccl-tests-src/ORIGIN"; then
    rm -rf "$BUILD/nccl-tests-src" "$BUILD/nccl-tests"
    cp -r "$SRC" "$BUILD/nccl-tests-src"
    arch=${CUDA_ARCH:-90}
    timed "build nccl-tests" 360 make -C "$BUILD/nccl-tests-src" -j "$(nproc)" MPI=0 \
      NCCL_HOME="$HOME_DIR" CUDA_HOME="$(dirname "$(dirname "$NVCC")")" NVCC="$NVCC" \
      NVCC_GENCODE="-gencode=arch=compute_$arch,code=sm_$arch" BUILDDIR="$BUILD/nccl-tests"
    rc=$?
  fi
  bins=$(ls "$BUILD"/nccl-tests/*_perf 2>/dev/null)
  if [ $rc != 0 ] || [ -z "$bins" ]; then
    result FAIL nccl-tests "build failed (exit $rc): $(grep -m1 -E 'error' "$LOG" | cut -c1-200)"
  else
    export LD_LIBRARY_PATH=$HOME_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    first=$(echo "$bins" | head -n 1)
    resolved=$(ldd "$first" | awk '$1 == "libnccl.so.2" {print $3}')
    [ "$(readlink -f "$resolved")" = "$(readlink -f "$NCCL_LIB")" ] ||
      result FAIL "nccl-tests linking" "$(basename "$first") loads libnccl.so.2 from '$resolved', not libzcoll_nccl.so"
    : >"$OUT/nccl_tests.txt"
    # One GPU seen as two (tools/gpu_one_gpu_as_many.c), for 2 ranks as threads.
    SHIM=$BUILD/one_gpu_as_many.so
    printf 'libcudart.so.13 {\n  global: cudaGetDeviceCount; cudaSetDevice; cudaGetDeviceProperties;\n    cudaDeviceGetAttribute;\n  local: *;\n};\n' >"$BUILD/one_gpu_as_many.map"
    "${CC:-cc}" -O2 -shared -fPIC -o "$SHIM" tools/gpu_one_gpu_as_many.c \
      -Wl,--version-script="$BUILD/one_gpu_as_many.map" -ldl >>"$LOG" 2>&1 || SHIM=
    nccl_tests_pass "1 rank" -g 1
    if [ -n "$SHIM" ]; then
      nccl_tests_pass "2 ranks as threads on the one GPU" -t 2 -g 1 -p 1 -- \
        LD_PRELOAD="$SHIM" ZCOLL_ONE_GPU_AS=2
    else
      result FAIL "nccl-tests, 2 ranks" "tools/gpu_one_gpu_as_many.c did not build (see step5.log)"
    fi
  fi
fi
