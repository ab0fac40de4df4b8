#!/usr/bin/env bash
# The intra-node host path side by side, in one run: zcoll over its shm transport with ordinary
# buffers and with registered ones (-R 1: zcollMemAllocHost, read in place by the peers), zcoll
# over UCX (ZCOLL_TRANSPORT=ucx: the path before shm existed), Open MPI 4.1 (ob1 + vader: shared
# memory + CMA) and Gloo (Debian libgloo-dev, TCP on loopback; out of place only), one node,
# float sum, 2 and 4 ranks, 1/4/16/64 MiB per rank, out of place and in place, all-gather,
# reduce-scatter and all-reduce. Bus bandwidth as nccl-tests defines it.
#
#   bash perf/peers/intra_node.sh [OUT.md]      (default perf/results/intra_node.md)
#
# Each row also gets its memory bound: the busbw a rank would reach if it did nothing but read
# and write the bytes it must (one copy of every byte that crosses processes, reductions read
# from the peers in place: all-gather 2*W*S out of place, 2*(W-1)*S in place; reduce-scatter
# (W+1)*S; all-reduce (3W-1)/W*S; S = per rank), at the copy rate one rank gets while all W copy
# at once (perf/peers/memcpy_bw.c: the better of memcpy and streaming stores, buffers the size of
# the case's largest one).
#
# Writes a Markdown table (busbw GB/s per library and the bound; ratios zcoll-shm / MPI,
# registered / MPI, / Gloo, / zcoll-ucx, and zcoll / bound) and prints it, then plots it as OUT.png (perf/peers/plot_intra_node.py: busbw vs
# size, one panel per collective and rank count; matplotlib is pip-installed into python3 if
# missing, as for perf/zero_train's plots; if that fails the PNG is skipped, the table kept).
# Installs Open MPI and Gloo if missing (Debian: openmpi-bin, libopenmpi-dev, libgloo-dev). On
# a 2-core machine the 4-rank runs are oversubscribed for every library alike.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-perf/results/intra_node.md}
if ! command -v mpicc >/dev/null || [ ! -e /usr/include/gloo/allgather.h ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    openmpi-bin libopenmpi-dev libgloo-dev >/dev/null
fi
[ -x build/perf/all_gather_perf ] || bash tools/build.sh
mkdir -p build/peers "$(dirname "$out")"
mpicc -O2 -o build/peers/mpi_coll_bench perf/peers/mpi_coll_bench.c
g++ -O2 -std=c++17 -o build/peers/gloo_coll_bench perf/peers/gloo_coll_bench.cc -lgloo -lpthread
gcc -O2 -o build/peers/memcpy_bw perf/peers/memcpy_bw.c
export UCX_NET_DEVICES=lo ZCOLL_SOCKET_IFNAME=lo

# zcoll_busbw TRANSPORT N BINARY SIZE FLAGS -> "out-of-place in-place" busbw
zcoll_busbw() {
  ZCOLL_TRANSPORT=$1 tools/zcollrun -n "$2" "build/perf/$3" -b "$4" -e "$4" $5 -d float -c 0 |
    awk '/^\[0\] +[0-9]/ {print $9, $13}'
}
# copy_rate N BYTES -> GB/s a rank copies while N ranks copy BYTES at once (mean over ranks)
copy_rate() {
  local dir start r
  dir=$(mktemp -d)
  start=$(($(date +%s%N) + 300000000))
  for ((r = 0; r < $1; ++r)); do build/peers/memcpy_bw "$2" "$start" 0.5 >"$dir/$r" & done
  wait
  cat "$dir"/* | awk '{s += ($2 > $3 ? $2 : $3)} END {printf "%.3f", s / NR}'
  rm -rf "$dir"
}
# bound_busbw COLL N BYTES_PER_RANK PLACE RATE -> busbw at RATE for the bytes a rank must move
bound_busbw() {
  awk -v c="$1" -v n="$2" -v s="$3" -v place="$4" -v m="$5" 'BEGIN {
    if (c == "allgather") { rw = 2 * (place == "out" ? n : n - 1) * s; size = n * s; f = (n - 1) / n }
    else if (c == "reduce_scatter") { rw = (n + 1) * s; size = n * s; f = (n - 1) / n }
    else { rw = (3 * n - 1) / n * s; size = s; f = 2 * (n - 1) / n }
    printf "%.2f", size * f / (rw / (2 * m * 1e9)) / 1e9 }'
}
mpi_busbw() {  # N COLL BYTES ITERS WARMUP [inplace]
  mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$1" \
    build/peers/mpi_coll_bench "${@:2}" | awk '{print $4}'
}
gloo_busbw() {  # N COLL BYTES ITERS WARMUP (ranks meet in a fresh FileStore directory)
  local dir out r
  dir=$(mktemp -d)
  for ((r = 0; r < $1; ++r)); do
    build/peers/gloo_coll_bench "$2" "$3" "$4" "$5" "$r" "$1" "$dir" >"$dir.$r" &
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
        rate=$(copy_rate "$n" "$([ $coll = allreduce ] && echo $bytes || echo $((bytes * n)))")
        mpi_oop=$(mpi_busbw "$n" $coll $bytes $iters)
        mpi_ip=$(mpi_busbw "$n" $coll $bytes $iters inplace)
        gloo_oop=$(gloo_busbw "$n" $coll $bytes $iters)
        for place in out in; do
          if [ $place = out ]; then
            s=$shm_oop r=$reg_oop u=$ucx_oop m=$mpi_oop g=$gloo_oop gr=$(ratio "$shm_oop" "$gloo_oop")
          else
            s=$shm_ip r=$reg_ip u=$ucx_ip m=$mpi_ip g=- gr=-
          fi
          b=$(bound_busbw $coll "$n" $bytes $place "$rate")
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
