#!/usr/bin/env bash
# Issue 39 part 3, claim 1: all_reduce_perf exact vs zcollQuantizedAllReduce INT8 (both hops and
# the gather) vs INT4 on the inter-node hop and the gather (INT8 intra-node), on 2 emulated nodes
# x 2 ranks whose link is limited to RATE (tools/emulate_cluster.sh: root, network namespaces).
# The three modes run interleaved, ROUNDS times, so their ratios are taken in one sitting.
#
#   perf/qar/emulated_allreduce.sh [ROUNDS] [RATE] [OUT.txt]      (defaults: 2 1gbit)
#   python3 perf/qar/report.py OUT.txt                             (the table)
set -uo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-2} rate=${2:-1gbit}
out=${3:-perf/qar/results/emulated_allreduce_$(date -u +%F)_$rate.txt}
mkdir -p "$(dirname "$out")"
bin=${BUILD:-build}/perf/all_reduce_perf
sizes=(-b 1M -e 256M -f 4 -n ${ITERS:-3} -w 1 -c 1)
{
  echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) cores," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((r = 1; r <= rounds; r++)); do
    for mode in exact int8 int4; do
      case $mode in
        exact) flags=(--wire) ;;
        int8) flags=(--bits 8 --intra-bits 8) ;;
        int4) flags=(--bits 4 --intra-bits 8) ;;
      esac
      echo "=== round $r mode $mode load $(cut -d' ' -f1-3 /proc/loadavg)"
      tools/emulate_cluster.sh --nodes 2 --ranks-per-node 2 --rate "$rate" -- \
        "$bin" "${sizes[@]}" "${flags[@]}" || echo "=== exit $?"
    done
  done
} 2>&1 | tee "$out"
