#!/usr/bin/env bash
# The training step of train_parity.py timed over emulated hosts (tools/emulate_cluster.sh, 2 nodes
# x 2 ranks, inter-node link limited to each RATE): torch + gloo ZeRO-3, torch + zcoll ZeRO-3 and
# torch + zcoll ZeRO++, ROUNDS rounds interleaved (every config once per round, so drift on a
# shared machine hits all alike). Writes perf/results/emulated_steps.{jsonl,md}: the median step
# time per config and rate, and the speedups over gloo. Needs root (network namespaces).
# zcoll ZeRO-3 runs twice: with zcoll's default algorithms, and with the hierarchical
# reduce-scatter (ZCOLL_ALGO_REDUCESCATTER=hierarchical, the option for slow links between nodes).
# The floor is the same step without communication (step_time.py --impl none): gloo's step over
# the floor is the most any backend's step can gain over gloo's on this machine.
#   usage: perf/zero_train/emulated_steps.sh [ROUNDS] [RATES] [step_time.py args...]
#   e.g.   perf/zero_train/emulated_steps.sh 3 1gbit,10gbit
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
rates=${2:-1gbit,10gbit}
shift $(($# < 2 ? $# : 2))
out=perf/results
mkdir -p "$out"
jsonl=$out/emulated_steps.jsonl
: > "$jsonl"
py=$(command -v python3)
export GLOO_SOCKET_IFNAME=zc0
# impl backend variant label [environment]
configs=("none gloo zero3 floor" "torch gloo zero3 gloo_zero3" "zcoll zcoll zero3 zcoll_zero3"
         "zcoll zcoll zero3 zcoll_zero3_hrs ZCOLL_ALGO_REDUCESCATTER=hierarchical"
         "zcoll zcoll zeropp zcoll_zeropp")
for ((round = 1; round <= rounds; round++)); do
  for rate in ${rates//,/ }; do
    for cfg in "${configs[@]}"; do
      read -r impl backend variant label environment <<< "$cfg"
      line=$(env ${environment:-} tools/emulate_cluster.sh --nodes 2 --ranks-per-node 2 \
               --rate "$rate" -- "$py" perf/zero_train/step_time.py --impl "$impl" \
               --backend "$backend" --variant "$variant" --label "$label" "$@" 2>&1 |
             sed -n 's/^\[0\] \({"label".*\)$/\1/p')
      [ -n "$line" ] || { echo "emulated_steps: no result for $cfg at $rate" >&2; exit 1; }
      echo "${line%\}}, \"rate\": \"$rate\", \"round\": $round}" | tee -a "$jsonl"
    done
  done
done
python3 - "$jsonl" "$out/emulated_steps.md" "$rounds" "$*" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = ["floor", "gloo_zero3", "zcoll_zero3", "zcoll_zero3_hrs", "zcoll_zeropp"]
rates = sorted({r["rate"] for r in rows}, key=lambda s: float(s.rstrip("gbit")))
params = rows[0]["params"]
lines = [f"Step time, 2 nodes x 2 ranks, {params / 1e6:.1f} M fp32 parameters, median over "
         f"{sys.argv[3]} interleaved rounds (each a median of the timed steps); extra args: "
         f"'{sys.argv[4]}'.", "",
         "| link | floor: no communication (s) | gloo ZeRO-3 (s) | zcoll ZeRO-3 (s) | "
         "zcoll ZeRO-3, hierarchical RS (s) | zcoll ZeRO++ (s) | zcoll ZeRO-3 vs gloo | "
         "zcoll ZeRO-3, hierarchical RS, vs gloo | zcoll ZeRO++ vs gloo ZeRO-3 | "
         "floor vs gloo ZeRO-3 (the most any backend reaches) |",
         "|---|---|---|---|---|---|---|---|---|---|"]
def per_round(rate, label):
    """{round: step time} of one config at one rate."""
    return {r["round"]: r["median_s"] for r in rows if r["rate"] == rate and r["label"] == label}


def speedup(rate, label):
    """gloo ZeRO-3's step over this config's: the ratio of the medians, and the range of the
    ratios within each round."""
    g, x = per_round(rate, "gloo_zero3"), per_round(rate, label)
    each = [g[k] / x[k] for k in sorted(g.keys() & x.keys())]
    mid = statistics.median(g.values()) / statistics.median(x.values())
    return f"**{mid:.2f}x** ({min(each):.2f}-{max(each):.2f})"


for rate in rates:
    med = {l: statistics.median(per_round(rate, l).values()) for l in labels}
    lines.append(f"| {rate} | {med['floor']:.3f} | {med['gloo_zero3']:.3f} | "
                 f"{med['zcoll_zero3']:.3f} | {med['zcoll_zero3_hrs']:.3f} | "
                 f"{med['zcoll_zeropp']:.3f} | {speedup(rate, 'zcoll_zero3')} | "
                 f"{speedup(rate, 'zcoll_zero3_hrs')} | {speedup(rate, 'zcoll_zeropp')} | "
                 f"{speedup(rate, 'floor')} |")
lines += ["", "Brackets: the range of the per-round ratios."]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
