#!/usr/bin/env bash
# Before/after in one sitting: the same perf commands on two builds (or two settings of one
# build), interleaved A B A B ... so a noisy shared machine slows both alike. Prints each
# round's figure, the median of each side and the ratio B/A.
#
#   perf/ab_compare.sh BUILD_A BUILD_B [ROUNDS]     e.g. a build of an older commit vs build/
#   AB_ENV_A="ZCOLL_RECORDER_SIZE=0" perf/ab_compare.sh build build 5    settings A/B on one build
#
# Figures: out-of-place bus bandwidth (GB/s, higher is better) of all-gather, reduce-scatter and
# all-reduce (float, 2 ranks, 1 MiB and 16 MiB), and zero_step_perf's ZeRO++ step time (ms,
# lower is better) on 4 ranks over 2 emulated nodes. Run from anywhere; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: $0 BUILD_A BUILD_B [ROUNDS]}
B=${2:?usage: $0 BUILD_A BUILD_B [ROUNDS]}
ROUNDS=${3:-3}
export UCX_NET_DEVICES=lo ZCOLL_SOCKET_IFNAME=lo

# busbw BUILD ENV BINARY BYTES -> out-of-place busbw of rank 0's row
busbw() {
  env $2 tools/zcollrun -n 2 "$1/perf/$3" -b "$4" -e "$4" -n 20 -w 5 -d float -c 0 2>/dev/null |
    awk '/^\[0\] +[0-9]/ {print $9; exit}'
}
# step BUILD ENV -> the ZeRO++ step's time in ms
step() {
  env $2 tools/zcollrun -n 4 --nodes 2 "$1/perf/zero_step_perf" -p 4M -n 3 -w 1 2>/dev/null |
    awk '$1 == "[0]" && $2 == "ZeRO++" && $3 == "step" {print $4; exit}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

cases=("all_gather_perf 1M" "all_gather_perf 16M" "reduce_scatter_perf 1M"
       "reduce_scatter_perf 16M" "all_reduce_perf 1M" "all_reduce_perf 16M" "zero_step")
printf "# A=%s %s  B=%s %s  rounds=%d  (%s)\n" "$A" "${AB_ENV_A:-}" "$B" "${AB_ENV_B:-}" \
  "$ROUNDS" "$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}')"
printf "%-26s %-30s %-30s %8s %8s %6s\n" "case" "A rounds" "B rounds" "A med" "B med" "B/A"
for c in "${cases[@]}"; do
  ra=(); rb=()
  for _ in $(seq 1 "$ROUNDS"); do
    if [ "$c" = zero_step ]; then
      ra+=("$(step "$A" "${AB_ENV_A:-}")"); rb+=("$(step "$B" "${AB_ENV_B:-}")")
    else
      set -- $c
      ra+=("$(busbw "$A" "${AB_ENV_A:-}" "$1" "$2")"); rb+=("$(busbw "$B" "${AB_ENV_B:-}" "$1" "$2")")
    fi
  done
  ma=$(printf "%s\n" "${ra[@]}" | median); mb=$(printf "%s\n" "${rb[@]}" | median)
  printf "%-26s %-30s %-30s %8s %8s %6.3f\n" "$c" "${ra[*]}" "${rb[*]}" "$ma" "$mb" \
    "$(awk -v a="$ma" -v b="$mb" 'BEGIN {print (a > 0) ? b / a : 0}')"
done
