#!/usr/bin/env bash
# zcoll's device path against NCCL on one GPU, in one run: 2 ranks as processes sharing the GPU
# (tools/zcollrun -n 2), 1 MiB to 256 MiB (x2 per step), out of place and in place:
#   - zcoll's perf binaries with --device 1 (cudaMalloc'd buffers, a non-blocking stream), once with
#     ZCOLL_DEVICE_TRANSPORT=cuda_ipc (device to device through CUDA IPC) and once with =staged
#     (through pinned host memory);
#   - NCCL (perf/peers/nccl_coll_bench.cc: same sizes, buffers, inputs, check and timing).
# all_gather, reduce_scatter, all_reduce, alltoall and sendrecv each against the same NCCL call;
# ZeRO++'s qwZ (quantized_all_gather_perf, INT8) and hpZ (hier_all_gather_perf, INT8 rail)
# against NCCL's all-gather and qgZ (quantized_reduce_scatter_perf) against NCCL's reduce-scatter:
# the calls they replace (their busbw is of the same logical size). Then zero_step_perf --device 1 per
# transport. Writes a Markdown table of bus bandwidth (GB/s, nccl-tests' definition) per size and
# the ratios zcoll / NCCL, and prints it.
#
#   bash perf/peers/device.sh [OUT.md]          (default perf/results/device.md)
#
# Environment: ZCOLL_BUILD_DIR (default build/, built by tools/build.sh when missing; the NCCL
# bench is built there when CMake found NCCL), DTYPE (float), ITERS (20), WARMUP (5), CHECK (1:
# each size is also checked; a wrong value marks the cell "(wrong)"), MAX (256M).
# NCCL_LIB_DIR: a directory whose libnccl.so.2 the NCCL bench loads (through LD_LIBRARY_PATH)
# instead of the one it was linked with; default: PyTorch's bundled NCCL (pip nvidia-nccl-cu*)
# when python3 has one. Two ranks on one GPU need NCCL 2.30.3 or later with
# NCCL_MULTI_RANK_GPU_ENABLE=1, which this script sets for the NCCL runs unless already set (older
# NCCLs refuse the second rank on the GPU: the NCCL column then reads "-" and the reason is
# listed under the table). Without a CUDA device: prints "SKIP: no CUDA device" and exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-perf/results/device.md}

skip() {
  echo "SKIP: no CUDA device"
  [ -n "${1:-}" ] && echo "$1"
  exit 0
}
# Cheap checks first (no build on a machine without a GPU); the binary's own probe decides below.
if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; } &&
   ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
  skip
fi

BUILD=${ZCOLL_BUILD_DIR:-build}
if [ ! -x "$BUILD/perf/all_gather_perf" ]; then
  [ "$BUILD" = build ] || { echo "device.sh: no $BUILD/perf/all_gather_perf" >&2; exit 1; }
  bash tools/build.sh || exit 1
fi
DTYPE=${DTYPE:-float} ITERS=${ITERS:-20} WARMUP=${WARMUP:-5} CHECK=${CHECK:-1} MAX=${MAX:-256M}
SWEEP=(-b 1M -e "$MAX" -f 2 -n "$ITERS" -w "$WARMUP" -c "$CHECK" -d "$DTYPE")
export ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
RUN=(python3 tools/zcollrun --timeout 900)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The probe: one rank, device buffers, one small call.
if ! "${RUN[@]}" -n 1 -- "$BUILD/perf/all_gather_perf" --device 1 -b 1K -e 1K -n 1 -w 0 \
     >"$TMP/probe" 2>&1; then
  grep -q "no CUDA device" "$TMP/probe" && skip "$(grep -m1 -o 'no CUDA device.*' "$TMP/probe")"
  echo "device.sh: all_gather_perf --device 1 fails (a build without CUDA? ZCOLL_WITH_CUDA=ON):" >&2
  cat "$TMP/probe" >&2
  exit 1
fi

NCCL_BENCH=$BUILD/perf/nccl_coll_bench
if [ -z "${NCCL_LIB_DIR:-}" ]; then
  NCCL_LIB_DIR=$(python3 - 2>/dev/null <<'EOF'
import os
import nvidia.nccl
for p in nvidia.nccl.__path__:
    if os.path.exists(os.path.join(p, "lib", "libnccl.so.2")):
        print(os.path.join(p, "lib"))
        break
EOF
) || NCCL_LIB_DIR=
fi
NCCL_ENV=(env "NCCL_MULTI_RANK_GPU_ENABLE=${NCCL_MULTI_RANK_GPU_ENABLE:-1}")
[ -n "$NCCL_LIB_DIR" ] &&
  NCCL_ENV+=("LD_LIBRARY_PATH=$NCCL_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

declare -A BW        # "source|collective|size|place" -> busbw, "fail" or "x (wrong)"
declare -A SIZES     # collective -> the sizes its rows showed
FAILURES=()
NCCL_VERSION="(no NCCL run succeeded)"

# parse SOURCE COLLECTIVE LOG: rank 0's rows into BW (busbw and #wrong columns found from the
# header, as tests/scripts/perf_smoke.sh does: binaries may add columns).
parse() {
  local src=$1 coll=$2 size oop ip wrong
  while read -r size oop ip wrong; do
    [ "$wrong" = 1 ] && { oop="$oop (wrong)"; [ "$ip" != N/A ] && ip="$ip (wrong)"; }
    BW["$src|$coll|$size|out"]=$oop
    BW["$src|$coll|$size|in"]=$ip
    case " ${SIZES[$coll]:-} " in *" $size "*) ;; *) SIZES[$coll]="${SIZES[$coll]:-} $size" ;; esac
  done < <(awk '
    /^\[0\] #.*busbw/ && nb == 0 {
      for (i = 1; i <= NF; i++) {
        if ($i == "busbw") b[++nb] = i - 1
        if ($i == "#wrong") w[++nw] = i - 1
      }
    }
    /^\[0\] +[0-9]/ {
      wrong = 0
      for (j = 1; j <= nw; j++) if ($(w[j]) != "0" && $(w[j]) != "N/A") wrong = 1
      print $2, $(b[1]), (nb > 1 ? $(b[2]) : "N/A"), wrong
    }' "$3")
}

# note_failure NAME LOG RC
note_failure() {
  local why
  why=$(grep -v '^zcollrun:' "$2" | grep -m1 -E 'failed|no CUDA device|error' |
        sed 's/^\[[0-9]*\] //' | cut -c1-300)
  FAILURES+=("$1: exit $3: ${why:-see its output}")
  echo "device.sh: $1 failed (exit $3)" >&2
  tail -n 20 "$2" >&2
}

# zcoll_run TRANSPORT NAME BINARY [FLAGS...]
zcoll_run() {
  local transport=$1 name=$2 bin=$3 log="$TMP/zcoll.$1.$2" rc
  shift 3
  echo "== zcoll $name, ZCOLL_DEVICE_TRANSPORT=$transport" >&2
  ZCOLL_DEVICE_TRANSPORT=$transport "${RUN[@]}" -n 2 -- "$BUILD/perf/$bin" --device 1 "${SWEEP[@]}" "$@" \
    >"$log" 2>&1
  rc=$?
  parse "$transport" "$name" "$log"
  [ $rc = 0 ] || note_failure "zcoll $name ($transport)" "$log" $rc
}

# nccl_run COLLECTIVE
nccl_run() {
  local log="$TMP/nccl.$1" rc
  if [ ! -x "$NCCL_BENCH" ]; then
    FAILURES+=("NCCL $1: no $NCCL_BENCH (CMake found no NCCL: set NCCL_HOME and reconfigure)")
    return
  fi
  echo "== NCCL $1${NCCL_LIB_DIR:+ (libnccl from $NCCL_LIB_DIR)}" >&2
  "${NCCL_ENV[@]}" "${RUN[@]}" -n 2 -- "$NCCL_BENCH" "$1" --id-dir "$(mktemp -d -p "$TMP")" \
    "${SWEEP[@]}" >"$log" 2>&1
  rc=$?
  parse nccl "$1" "$log"
  local v
  v=$(grep -m1 -o '# nccl [0-9.]* (loaded[^)]*)' "$log" | sed 's/^# nccl //')
  [ -n "$v" ] && NCCL_VERSION=$v
  [ $rc = 0 ] || note_failure "NCCL $1" "$log" $rc
}

# name | zcoll binary | the NCCL collective it is set against | extra flags
COLLS=(
  "all_gather|all_gather_perf|all_gather|"
  "reduce_scatter|reduce_scatter_perf|reduce_scatter|"
  "all_reduce|all_reduce_perf|all_reduce|"
  "alltoall|alltoall_perf|alltoall|"
  "sendrecv|sendrecv_perf|sendrecv|"
  "qwZ INT8 all-gather|quantized_all_gather_perf|all_gather|--bits 8"
  "hpZ all-gather (INT8 rail)|hier_all_gather_perf|all_gather|"
  "qgZ INT4 reduce-scatter|quantized_reduce_scatter_perf|reduce_scatter|"
)

for nccl in all_gather reduce_scatter all_reduce alltoall sendrecv; do nccl_run $nccl; done
for entry in "${COLLS[@]}"; do
  IFS='|' read -r name bin _ flags <<<"$entry"
  for transport in cuda_ipc staged; do
    # shellcheck disable=SC2086
    zcoll_run $transport "$name" "$bin" $flags
  done
done

declare -A STEP
for transport in cuda_ipc staged; do
  log="$TMP/zero_step.$transport"
  echo "== zero_step_perf --device 1, ZCOLL_DEVICE_TRANSPORT=$transport" >&2
  ZCOLL_DEVICE_TRANSPORT=$transport "${RUN[@]}" --no-prefix -n 2 -- \
    "$BUILD/perf/zero_step_perf" --device 1 -d bfloat16 >"$log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then STEP[$transport]=$(grep -E '^(#|  |zero_step:)' "$log")
  else note_failure "zero_step_perf ($transport)" "$log" $rc; STEP[$transport]="failed (exit $rc)"
  fi
done

ratio() {
  awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN {
    if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'
}

mkdir -p "$(dirname "$out")"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
{
  echo "# zcoll device path vs NCCL, 2 ranks on one GPU"
  echo
  echo "$(date -u +%Y-%m-%d), GPU: ${gpu:-unknown}; NCCL $NCCL_VERSION;"
  [ -n "$NCCL_LIB_DIR" ] && echo "libnccl.so.2 loaded from $NCCL_LIB_DIR;"
  echo "\`bash perf/peers/device.sh\`: tools/zcollrun -n 2, flags \`${SWEEP[*]}\`, zcoll with --device 1."
  echo "Bus bandwidth in GB/s (nccl-tests' definition; the ZeRO++ rows use the logical size of"
  echo "the call they replace, so they read as effective bandwidth). Time per call: host clock"
  echo "around $ITERS enqueued calls + cudaStreamSynchronize, max over ranks."
  echo
  echo "| collective | size (B) | place | zcoll cuda_ipc | zcoll staged | NCCL | cuda_ipc / NCCL | staged / NCCL |"
  echo "|---|---|---|---|---|---|---|---|"
  for entry in "${COLLS[@]}"; do
    IFS='|' read -r name _ nccl _ <<<"$entry"
    for size in ${SIZES[$name]:-}; do
      for place in out in; do
        c=${BW["cuda_ipc|$name|$size|$place"]:--}
        s=${BW["staged|$name|$size|$place"]:--}
        n=${BW["nccl|$nccl|$size|$place"]:--}
        [ "$c$s$n" = "N/AN/AN/A" ] && continue
        echo "| $name | $size | $place | $c | $s | $n | $(ratio "$c" "$n") | $(ratio "$s" "$n") |"
      done
    done
  done
  echo
  for transport in cuda_ipc staged; do
    echo "zero_step_perf --device 1 -d bfloat16, ZCOLL_DEVICE_TRANSPORT=$transport:"
    echo
    echo '```'
    echo "${STEP[$transport]}"
    echo '```'
    echo
  done
  if [ ${#FAILURES[@]} -gt 0 ]; then
    echo "Failures:"
    echo
    for f in "${FAILURES[@]}"; do echo "- $f"; done
  fi
} | tee "$out"
[ ${#FAILURES[@]} -eq 0 ]
