#!/usr/bin/env python3
"""The Markdown tables of perf/ddp/train_parity.py's results (printed):

    python3 perf/ddp/parity_report.py [perf/ddp/results] [--steps N] [--optim adamw|sgd]

Per training setting (one pair of tables per run length, optimizer and learning rate; --steps and
--optim keep only those runs), per config and seed:
the final training loss (mean of the last 10 steps, mean over ranks) and the held-out loss, each
with its relative difference from the exact all-reduce of the same seed and setting (DDP: `exact`;
HSDP: `hsdp_exact`), whether every replica ended bit-identical, and for HSDP the replicate
all-reduce's inter-node bytes per step (rank 0's); then the mean over seeds, each config's against
the exact runs of the same seeds. A run with --block is its own row, "<config> block <B>", after
the config's default-block rows.
"""
import argparse
import glob
import json
import os
import statistics

ORDER = ["exact", "exact_gloo", "int8", "int4ef", "int4", "hsdp_exact", "hsdp_int8", "hsdp_int4ef"]


def rel(v, ref):
    return f"{100 * (v - ref) / ref:+.2f}%"


def label(run):
    block = run["settings"].get("block")
    return run["config"] if block is None else f"{run['config']} block {block}"


def label_order(labels):
    """ORDER's configs first (default block, then by block), a config ORDER lacks last."""
    def key(lab):
        config, _, block = lab.partition(" block ")
        rank = ORDER.index(config) if config in ORDER else len(ORDER)
        return (rank, config, int(block) if block else 0)
    return sorted(labels, key=key)


def training_setting(run):
    """(steps, optimizer, learning rate): runs compare only with the exact run of the same one
    (the first results predate --optim: AdamW)."""
    return run["steps"], run["settings"].get("optim", "adamw"), run["settings"]["lr"]


def reference(config):
    return "hsdp_exact" if config.startswith("hsdp") else "exact"


def losses(run):
    return run["final_train_loss_avg10"], run["heldout_loss"]


def seed_table(runs):
    print("| config | seed | steps | train loss | vs exact | held-out loss | vs exact | "
          "replicas identical | replicate inter-node B/step | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lab in label_order({lab for lab, _ in runs}):
        for seed in sorted(s for la, s in runs if la == lab):
            r = runs[(lab, seed)]
            ref = runs.get((reference(r["config"]), seed))
            tr, he = losses(r)
            inter = r.get("replicate_inter_bytes_per_step_rank0")
            print(f"| {lab} | {seed} | {r['steps']} | {tr:.4f} | "
                  f"{rel(tr, ref['final_train_loss_avg10']) if ref else '-'} | {he:.4f} | "
                  f"{rel(he, ref['heldout_loss']) if ref else '-'} | "
                  f"{'yes' if r['replicas_identical'] else 'no'} | "
                  f"{'-' if inter is None else f'{inter:.0f}'} | {r['seconds']:.0f} |")


def mean_table(runs):
    print("| config | seeds | train loss | vs exact | held-out loss | vs exact |")
    print("|---|---|---|---|---|---|")
    for lab in label_order({lab for lab, _ in runs}):
        seeds = sorted(s for la, s in runs if la == lab)
        tr = statistics.mean(losses(runs[(lab, s)])[0] for s in seeds)
        he = statistics.mean(losses(runs[(lab, s)])[1] for s in seeds)
        ref_label = reference(runs[(lab, seeds[0])]["config"])
        if all((ref_label, s) in runs for s in seeds):  # the exact runs of the same seeds
            rtr = statistics.mean(losses(runs[(ref_label, s)])[0] for s in seeds)
            rhe = statistics.mean(losses(runs[(ref_label, s)])[1] for s in seeds)
            vs_tr, vs_he = rel(tr, rtr), rel(he, rhe)
        else:
            vs_tr = vs_he = "-"
        print(f"| {lab} | {len(seeds)} | {tr:.4f} | {vs_tr} | {he:.4f} | {vs_he} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("folder", nargs="?",
                   default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--steps", type=int, help="only the runs of this many steps")
    p.add_argument("--optim", help="only the runs with this optimizer")
    args = p.parse_args()
    groups = {}
    for path in glob.glob(os.path.join(args.folder, "*_seed*.json")):
        r = json.load(open(path))
        setting = training_setting(r)
        if args.steps in (None, setting[0]) and args.optim in (None, setting[1]):
            groups.setdefault(setting, {})[(label(r), r["seed"])] = r
    for i, (steps, optim, lr) in enumerate(sorted(groups)):
        if i:
            print()
        if len(groups) > 1:
            print(f"{steps} steps, {optim} lr {lr:g}:\n")
        seed_table(groups[(steps, optim, lr)])
        print("\nMean over seeds:\n")
        mean_table(groups[(steps, optim, lr)])


if __name__ == "__main__":
    main()
