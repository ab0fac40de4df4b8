#!/usr/bin/env python3
"""The Markdown tables of perf/ddp/train_parity.py's results (printed):

    python3 perf/ddp/parity_report.py [perf/ddp/results]

Per config and seed: the final training loss (mean of the last 10 steps, mean over ranks) and the
held-out loss, each with its relative difference from the exact all-reduce of the same seed
(DDP: `exact`; HSDP: `hsdp_exact`), whether every replica ended bit-identical, and for HSDP the
replicate all-reduce's inter-node bytes per step (rank 0's); then the mean over seeds.
"""
import glob
import json
import os
import statistics
import sys

ORDER = ["exact", "exact_gloo", "int8", "int4ef", "int4", "hsdp_exact", "hsdp_int8", "hsdp_int4ef"]


def rel(v, ref):
    return f"{100 * (v - ref) / ref:+.2f}%"


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                                 "results")
    runs = {}
    for path in glob.glob(os.path.join(folder, "*_seed*.json")):
        r = json.load(open(path))
        runs[(r["config"], r["seed"])] = r
    print("| config | seed | steps | train loss | vs exact | held-out loss | vs exact | "
          "replicas identical | replicate inter-node B/step | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    means = {}
    for config in ORDER:
        for seed in sorted(s for c, s in runs if c == config):
            r = runs[(config, seed)]
            ref = runs.get(("hsdp_exact" if config.startswith("hsdp") else "exact", seed))
            tr, he = r["final_train_loss_avg10"], r["heldout_loss"]
            inter = r.get("replicate_inter_bytes_per_step_rank0")
            print(f"| {config} | {seed} | {r['steps']} | {tr:.4f} | "
                  f"{rel(tr, ref['final_train_loss_avg10']) if ref else '-'} | {he:.4f} | "
                  f"{rel(he, ref['heldout_loss']) if ref else '-'} | "
                  f"{'yes' if r['replicas_identical'] else 'no'} | "
                  f"{'-' if inter is None else f'{inter:.0f}'} | {r['seconds']:.0f} |")
            means.setdefault(config, []).append((tr, he))
    print("\nMean over seeds:\n")
    print("| config | seeds | train loss | vs exact | held-out loss | vs exact |")
    print("|---|---|---|---|---|---|")
    for config in ORDER:
        if config not in means:
            continue
        ref = means.get("hsdp_exact" if config.startswith("hsdp") else "exact")
        tr = statistics.mean(t for t, _ in means[config])
        he = statistics.mean(h for _, h in means[config])
        rtr = statistics.mean(t for t, _ in ref) if ref else None
        rhe = statistics.mean(h for _, h in ref) if ref else None
        print(f"| {config} | {len(means[config])} | {tr:.4f} | "
              f"{rel(tr, rtr) if ref else '-'} | {he:.4f} | {rel(he, rhe) if ref else '-'} |")


if __name__ == "__main__":
    main()
