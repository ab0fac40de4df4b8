#!/usr/bin/env bash
# zcoll against Open MPI on this machine, in one run: all-gather and reduce-scatter (float sum,
# out of place) for 2 and 4 ranks at 1 MiB and 64 MiB per rank. Prints bus bandwidth and the
# ratio zcoll / MPI. Installs Open MPI if missing (Debian: openmpi-bin, libopenmpi-dev).
# Open MPI runs its defaults here: ob1 + vader (shared memory, CMA) -- the same kind of path
# UCX takes for zcoll on one machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v mpicc >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    openmpi-bin libopenmpi-dev >/dev/null
fi
[ -x build/perf/all_gather_perf ] || bash tools/build.sh
mkdir -p build/peers
mpicc -O2 -o build/peers/mpi_coll_bench perf/peers/mpi_coll_bench.c
export UCX_NET_DEVICES=lo ZCOLL_SOCKET_IFNAME=lo
mpirun_() { mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$@"; }
zcoll_busbw() {  # N BINARY TOTAL_BYTES ITER_FLAGS -> out-of-place busbw
  tools/zcollrun -n "$1" $([ "$1" -gt 2 ] && echo "--nodes 2") "build/perf/$2" \
    -b "$3" -e "$3" $4 -d float -c 0 | awk '/^\[0\] +[0-9]/ {print $9}'
}
printf "%-15s %5s %10s %12s %12s %8s\n" collective ranks "per rank" "zcoll GB/s" "MPI GB/s" ratio
for n in 2 4; do
  for per in 1 64; do
    bytes=$((per * 1024 * 1024))
    iters=$([ "$per" = 1 ] && echo "20 5" || echo "5 1")
    flags=$([ "$per" = 1 ] && echo "-n 20 -w 5" || echo "-n 5 -w 1")
    for coll in allgather reduce_scatter; do
      bin=$([ $coll = allgather ] && echo all_gather_perf || echo reduce_scatter_perf)
      z=$(zcoll_busbw "$n" "$bin" $((bytes * n)) "$flags")
      m=$(mpirun_ "$n" build/peers/mpi_coll_bench $coll $bytes $iters | awk '{print $4}')
      printf "%-15s %5d %9dM %12s %12s %8.2f\n" $coll "$n" "$per" "$z" "$m" \
        "$(awk -v z="$z" -v m="$m" 'BEGIN {print (m > 0 ? z / m : 0)}')"
    done
  done
done
