#!/usr/bin/env python3
"""Summarizes perf/ddp/emulated_steps.sh's JSON lines as Markdown (printed):

    python3 perf/ddp/step_report.py perf/ddp/results/emulated_steps.jsonl

Per link rate: each config's median step time over the rounds (each round's figure is
step_time.py's median over its timed steps), then the ratios the issue asks for (gloo / hook and
hook / floor), each the ratio of the medians with the range of the per-round ratios, and the
inter-node bytes per step (every node's zc0 transmit count; zcoll's own payload count).
"""
import json
import statistics
import sys

CONFIGS = ("floor", "gloo", "zcoll", "int8", "int4ef")


def per_round(rows, rate, config, key="median_s"):
    return {r["round"]: r[key] for r in rows if r["rate"] == rate and r["config"] == config}


def ratio(rows, rate, num, den):
    a, b = per_round(rows, rate, num), per_round(rows, rate, den)
    each = [a[k] / b[k] for k in sorted(a.keys() & b.keys())]
    if not each:
        return "-"
    mid = statistics.median(a.values()) / statistics.median(b.values())
    return f"**{mid:.2f}x** ({min(each):.2f}-{max(each):.2f})"


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    for rate in sorted({r["rate"] for r in rows}):
        rounds = sorted({r["round"] for r in rows if r["rate"] == rate})
        print(f"\n{rate}, {len(rounds)} rounds, loads: "
              + "; ".join(sorted({r['load'] for r in rows if r['rate'] == rate})) + "\n")
        print("| config | step (s), per round | median | veth B/step | zcoll inter B/step |")
        print("|---|---|---|---|---|")
        for c in CONFIGS:
            t = per_round(rows, rate, c)
            if not t:
                continue
            veth = statistics.median(per_round(rows, rate, c, "veth_bytes_per_step").values())
            zi = [r.get("zcoll_inter_bytes_per_step") for r in rows
                  if r["rate"] == rate and r["config"] == c]
            zi = f"{statistics.median(zi):.0f}" if zi and zi[0] is not None else "-"
            print(f"| {c} | {', '.join(f'{t[k]:.3f}' for k in sorted(t))} | "
                  f"{statistics.median(t.values()):.3f} | {veth:.0f} | {zi} |")
        print()
        for hook in ("int8", "int4ef", "zcoll"):
            print(f"- gloo / {hook}: {ratio(rows, rate, 'gloo', hook)}; "
                  f"{hook} / floor: {ratio(rows, rate, hook, 'floor')}")


if __name__ == "__main__":
    main()
