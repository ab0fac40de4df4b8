#!/usr/bin/env bash
# DDP training step (perf/ddp/step_time.py) over emulated hosts (tools/emulate_cluster.sh,
# 2 nodes x 2 ranks, the inter-node link limited to each RATE): the no-communication floor,
# DDP on gloo, DDP on zcoll (exact) and DDP + zcoll.ddp's hook (INT8; INT4 inter-node with error
# feedback), ROUNDS rounds interleaved
# (every config once per round and rate, the order reversed every other round, so drift on a
# shared machine hits all alike). Each line of perf/ddp/results/emulated_steps.jsonl is
# step_time.py's JSON plus the rate, the round and the load average before the run;
# perf/ddp/step_report.py turns them into perf/ddp/results/emulated_steps.md (step times,
# ratios with their per-round ranges, inter-node bytes). Needs root (network namespaces).
#   usage: perf/ddp/emulated_steps.sh [ROUNDS] [RATES] [step_time.py args...]
#   e.g.   perf/ddp/emulated_steps.sh 2 1gbit
# PYTHON: the interpreter with torch and zcoll (default: python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
rates=${2:-1gbit,10gbit}
shift $(($# < 2 ? $# : 2))
out=perf/ddp/results
mkdir -p "$out"
jsonl=$out/emulated_steps.jsonl
: > "$jsonl"
py=${PYTHON:-$(command -v python3)}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export GLOO_SOCKET_IFNAME=zc0
order=(floor gloo zcoll int8 int4ef)
for ((round = 1; round <= rounds; round++)); do
  for rate in ${rates//,/ }; do
    configs=("${order[@]}")
    if ((round % 2 == 0)); then configs=(int4ef int8 zcoll gloo floor); fi
    for config in "${configs[@]}"; do
      line=
      for try in 1 2; do  # a failed run (e.g. a port taken by another program) is run again
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        tools/emulate_cluster.sh --nodes 2 --ranks-per-node 2 --rate "$rate" -- \
          "$py" perf/ddp/step_time.py --config "$config" "$@" > "$log" 2>&1 || true
        line=$(sed -n 's/^\[0\] \({"label".*\)$/\1/p' "$log")
        [ -n "$line" ] && break
        echo "emulated_steps: no result for $config at $rate (try $try); its output ends:" >&2
        grep -v "UCX  WARN\|socket.cpp" "$log" | tail -n 15 >&2
      done
      [ -n "$line" ] || exit 1
      echo "${line%\}}, \"rate\": \"$rate\", \"round\": $round, \"load\": \"$load\"}" |
        tee -a "$jsonl"
    done
  done
done
"$py" perf/ddp/step_report.py "$jsonl" | tee "$out/emulated_steps.md"
