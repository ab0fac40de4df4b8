#!/usr/bin/env bash
# The intra-node host path side by side, in one run: zcoll over its shm transport with ordinary
# buffers and with registered ones (-R 1: zcollMemAllocHost, read in place by the peers), zcoll
# over UCX (ZCOLL_TRANSPORT=ucx: the path before shm existed), Open MPI 4.1 (ob1 + vader: shared
# memory + CMA) and Gloo (Debian libgloo-dev, TCP on loopback; out of place only), one node,
# float sum, 2 and 4 ranks, 1/4/16/64 MiB per rank, out of place and in place, all-gather,
# reduce-scatter and all-reduce. Bus bandwidth as nccl-tests defines it.
#
#   bash perf/peers/intra_node.sh [OUT.md]      (default perf/results/intra_node.md)
#   bash perf/peers/intra_node.sh --bounds [OUT.md]   (default perf/results/intra_node_bounds.md)
#
# Each row also gets its memory bound: the busbw a rank would reach if it moved only the bytes
# of the least-traffic data flow of the collective (S = bytes per rank, W ranks; perf/README.md
# derives them):
#   all-gather      (W+1)*S out of place, W*S in place (read the own chunk once, write it into
#                   every output that lacks it)
#   reduce-scatter  (W+1)*S (read the chunk it owns from all W inputs, write it once)
#   all-reduce      2*S (each rank reduces 1/W of the buffer from all W inputs and writes it into
#                   all W outputs: every input byte read once, every output byte written once)
# at the copy rate one rank gets on the collective's own working set (its send and receive
# buffers: all-gather / reduce-scatter (W+1)*S out of place, W*S in place; all-reduce 2*S and
# S) while all W ranks copy at once (perf/peers/memcpy_bw.c: the better of memcpy and
# streaming stores, source and destination half the working set each), so a case that fits in
# the caches is held to the in-cache rate. --bounds prints only that part (copy rate, traffic,
# bound per row; it needs only a C compiler) and writes it to OUT.md.
#
# Writes a Markdown table (busbw GB/s per library and the bound; ratios zcoll-shm / MPI,
# registered / MPI, / Gloo, / zcoll-ucx, and zcoll / bound) and prints it, then plots it as OUT.png (perf/peers/plot_intra_node.py: busbw vs
# size, one panel per collective and rank count; matplotlib is pip-installed into python3 if
# missing, as for perf/zero_train's plots; if that fails the PNG is skipped, the table kept).
# Installs Open MPI and Gloo if missing (Debian: openmpi-bin, libopenmpi-dev, libgloo-dev). On
# a 2-core machine the 4-rank runs are oversubscribed for every library alike.
set -euo pipefail
cd "$(dirname "$0")/../.."
bounds_only=0
if [ "${1:-}" = --bounds ]; then
  bounds_only=1
  shift
fi
suffix=""
[ $bounds_only = 0 ] || suffix=_bounds
out=${1:-perf/results/intra_node$suffix.md}
peers=${PEERS_DIR:-build/peers}  # where the helper binaries are built
mkdir -p "$peers" "$(dirname "$out")"
gcc -O2 -o "$peers/memcpy_bw" perf/peers/memcpy_bw.c
if [ $bounds_only = 0 ]; then
  if ! command -v mpicc >/dev/null || [ ! -e /usr/include/gloo/allgather.h ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      openmpi-bin libopenmpi-dev libgloo-dev >/dev/null
  fi
  [ -x build/perf/all_gather_perf ] || bash tools/build.sh
  mpicc -O2 -o "$peers/mpi_coll_bench" perf/peers/mpi_coll_bench.c
  g++ -O2 -std=c++17 -o "$peers/gloo_coll_bench" perf/peers/gloo_coll_bench.cc -lgloo -lpthread
fi
export UCX_NET_DEVICES=lo ZCOLL_SOCKET_IFNAME=lo

# zcoll_busbw TRANSPORT N BINARY SIZE FLAGS -> "out-of-place in-place" busbw
zcoll_busbw() {
  ZCOLL_TRANSPORT=$1 tools/zcollrun -n "$2" "build/perf/$3" -b "$4" -e "$4" $5 -d float -c 0 |
    awk '/^\[0\] +[0-9]/ {print $9, $13}'
}
# copy_rate N BYTES -> GB/s a rank copies BYTES (read BYTES, write BYTES) while N ranks copy at
# once (mean over ranks)
copy_rate() {
  local dir start r
  dir=$(mktemp -d)
  start=$(($(date +%s%N) + 300000000))
  for ((r = 0; r < $1; ++r)); do "$peers/memcpy_bw" "$2" "$start" 0.5 >"$dir/$r" & done
  wait
  cat "$dir"/* | awk '{s += ($2 > $3 ? $2 : $3)} END {printf "%.3f", s / NR}'
  rm -rf "$dir"
}
# working_set COLL N BYTES_PER_RANK PLACE -> bytes of one rank's send and receive buffers
working_set() {
  awk -v c="$1" -v n="$2" -v s="$3" -v place="$4" 'BEGIN {
    if (c == "allreduce") ws = (place == "out" ? 2 : 1) * s
    else ws = (place == "out" ? n + 1 : n) * s
    printf "%d", ws }'
}
# traffic COLL N BYTES_PER_RANK PLACE -> bytes one rank reads + writes in the least-traffic flow
traffic() {
  awk -v c="$1" -v n="$2" -v s="$3" -v place="$4" 'BEGIN {
    if (c == "allgather") rw = (place == "out" ? n + 1 : n) * s
    else if (c == "reduce_scatter") rw = (n + 1) * s
    else rw = 2 * s
    printf "%d", rw }'
}
# bound_busbw COLL N BYTES_PER_RANK PLACE RATE -> busbw at RATE (GB/s copied: each byte read
# and written) for the least-traffic flow's bytes
bound_busbw() {
  awk -v c="$1" -v n="$2" -v s="$3" -v rw="$(traffic "$@")" -v m="$5" 'BEGIN {
    if (c == "allreduce") { size = s; f = 2 * (n - 1) / n } else { size = n * s; f = (n - 1) / n }
    printf "%.2f", size * f / (rw / (2 * m * 1e9)) / 1e9 }'
}
# bound_row COLL N BYTES_PER_RANK PLACE -> "rate bound" (the copy rate on the working set)
bound_row() {
  local rate
  rate=$(copy_rate "$2" $(($(working_set "$@") / 2)))
  echo "$rate $(bound_busbw "$@" "$rate")"
}

if [ $bounds_only = 1 ]; then
  {
    echo "| collective | ranks | per rank | place | working set / rank | traffic / rank | copy rate GB/s | bound busbw GB/s |"
    echo "|---|---|---|---|---|---|---|---|"
    for coll in allgather reduce_scatter allreduce; do
      for n in 2 4; do
        for per in 1 4 16 64; do
          bytes=$((per * 1024 * 1024))
          for place in out in; do
            read -r rate b <<<"$(bound_row $coll "$n" $bytes $place)"
            ws=$(($(working_set $coll "$n" $bytes $place) / 1048576))
            tr=$(($(traffic $coll "$n" $bytes $place) / 1048576))
            echo "| $coll | $n | ${per} MiB | $place | ${ws} MiB | ${tr} MiB | $rate | $b |"
          done
        done
      done
    done
  } | tee "$out"
  exit 0
fi

mpi_busbw() {  # N COLL BYTES ITERS WARMUP [inplace]
  mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$1" \
    "$peers/mpi_coll_bench" "${@:2}" | awk '{print $4}'
}
gloo_busbw() {  # N COLL BYTES ITERS WARMUP (ranks meet in a fresh FileStore directory)
  local dir out r
  dir=$(mktemp -d)
  for ((r = 0; r < $1; ++r)); do
    "$peers/gloo_coll_bench" "$2" "$3" "$4" "$5" "$r" "$1" "$dir" >"$dir.$r" &
  done
  wait
  out=$(awk '{print $4}' "$dir.0")
  rm -rf "$dir" "$dir".*
  echo "$out"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }

{
  echo "| collective | ranks | per rank | place | zcoll shm | zcoll shm registered | zcoll ucx | Open MPI | Gloo | memory bound | shm / MPI | registered / MPI | shm / Gloo | shm / ucx | shm / bound | registered / bound |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for coll in allgather reduce_scatter allreduce; do
    case $coll in
      allgather) bin=all_gather_perf ;;
      reduce_scatter) bin=reduce_scatter_perf ;;
      allreduce) bin=all_reduce_perf ;;
    esac
    for n in 2 4; do
      for per in 1 4 16 64; do
        bytes=$((per * 1024 * 1024))
        size=$([ $coll = allreduce ] && echo $bytes || echo $((bytes * n)))
        if [ "$per" -ge 16 ]; then iters="5 1"; else iters="20 3"; fi
        flags="-n ${iters% *} -w ${iters#* }"
        read -r shm_oop shm_ip <<<"$(zcoll_busbw shm "$n" $bin $size "$flags")"
        read -r reg_oop reg_ip <<<"$(zcoll_busbw shm "$n" $bin $size "$flags -R 1")"
        read -r ucx_oop ucx_ip <<<"$(zcoll_busbw ucx "$n" $bin $size "$flags")"
        mpi_oop=$(mpi_busbw "$n" $coll $bytes $iters)
        mpi_ip=$(mpi_busbw "$n" $coll $bytes $iters inplace)
        gloo_oop=$(gloo_busbw "$n" $coll $bytes $iters)
        for place in out in; do
          if [ $place = out ]; then
            s=$shm_oop r=$reg_oop u=$ucx_oop m=$mpi_oop g=$gloo_oop gr=$(ratio "$shm_oop" "$gloo_oop")
          else
            s=$shm_ip r=$reg_ip u=$ucx_ip m=$mpi_ip g=- gr=-
          fi
          read -r _ b <<<"$(bound_row $coll "$n" $bytes $place)"
          echo "| $coll | $n | ${per} MiB | $place | $s | $r | $u | $m | $g | $b | $(ratio "$s" "$m") | $(ratio "$r" "$m") | $gr | $(ratio "$s" "$u") | $(ratio "$s" "$b") | $(ratio "$r" "$b") |"
        done
      done
    done
  done
} | tee "$out"

png=${out%.md}.png
if ! err=$(python3 -c 'import matplotlib' 2>&1 || python3 -m pip install -q matplotlib 2>&1); then
  echo "intra_node.sh: $png skipped: matplotlib missing and pip install failed: $(tail -n1 <<<"$err")" >&2
elif ! python3 perf/peers/plot_intra_node.py "$out" "$png"; then
  echo "intra_node.sh: $png skipped: plot_intra_node.py failed (the table is in $out)" >&2
fi
