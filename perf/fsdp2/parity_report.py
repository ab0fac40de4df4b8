#!/usr/bin/env python3
"""Table and plot of perf/fsdp2/train_parity.py's runs:

    python3 perf/fsdp2/parity_report.py [--results perf/fsdp2/results] [--png perf/results/fsdp2_parity.png]

Reads every <config>_seed<seed>.json there and prints a Markdown table per seed and config:
the final training loss (mean over ranks, then over the last --tail steps), the held-out loss on
the trained parameters and through the FSDP forward, each against unquantized FSDP2 on gloo and
on zcoll of the same seed (same initial weights, same batches), then the mean of those
differences over the seeds. Writes the PNG: the training loss of every run (a --tail-step moving
mean), one panel per seed, and the last 100 steps enlarged.
"""
import argparse
import glob
import json
import os
import statistics

NAMES = {"gloo": "FSDP2 + gloo", "zcoll": "FSDP2 + zcoll",
         "zeropp": "ZeRO++ (qwZ INT8, hpZ, qgZ INT4/INT4)",
         "zeropp8": "ZeRO++ (qwZ INT8, hpZ, qgZ INT8/INT8)",
         "zeropp4w": "ZeRO++ (qwZ INT4, hpZ, qgZ INT4/INT4)",
         "zeropp_ef": "ZeRO++ INT4/INT4 + error feedback"}
REFERENCES = ("gloo", "zcoll")


def load(results):
    runs = {}
    for path in sorted(glob.glob(os.path.join(results, "*_seed*.json"))):
        r = json.load(open(path))
        runs[(r["config"], r["seed"])] = r
    return runs


def final(r, tail):
    return statistics.mean(r["train_loss"][-tail:])


def table(runs, tail):
    seeds = sorted({s for _, s in runs})
    configs = [c for c in NAMES if any((c, s) in runs for s in seeds)]
    head = ("| seed | config | final train loss | vs gloo | vs zcoll | held-out loss | vs gloo | "
            "vs zcoll | held-out, FSDP forward | vs gloo |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    diffs = {}

    def rel(value, ref):
        return 100 * (value / ref - 1)

    for s in seeds:
        for c in configs:
            r = runs.get((c, s))
            if r is None:
                continue
            cols = [f"{final(r, tail):.4f}"]
            d = {}
            for ref in REFERENCES:
                q = runs.get((ref, s))
                d[("train", ref)] = rel(final(r, tail), final(q, tail)) if q else None
                d[("held", ref)] = rel(r["heldout_loss"], q["heldout_loss"]) if q else None
            q = runs.get(("gloo", s))
            d[("fsdp", "gloo")] = (rel(r["heldout_loss_fsdp_forward"],
                                       q["heldout_loss_fsdp_forward"]) if q else None)
            diffs[(c, s)] = d

            def pct(key):
                return "" if d[key] is None or c == key[1] else f"{d[key]:+.2f}%"
            lines.append(f"| {s} | {NAMES[c]} | {final(r, tail):.4f} | {pct(('train', 'gloo'))} | "
                         f"{pct(('train', 'zcoll'))} | {r['heldout_loss']:.4f} | "
                         f"{pct(('held', 'gloo'))} | {pct(('held', 'zcoll'))} | "
                         f"{r['heldout_loss_fsdp_forward']:.4f} | {pct(('fsdp', 'gloo'))} |")
    lines += ["", "Mean over seeds of the differences (and the largest |difference|):", "",
              "| config | train vs gloo | held-out vs gloo | train vs zcoll | held-out vs zcoll |",
              "|---|---|---|---|---|"]
    for c in configs:
        if c in REFERENCES:
            continue
        cells = []
        for key in (("train", "gloo"), ("held", "gloo"), ("train", "zcoll"), ("held", "zcoll")):
            v = [diffs[(c, s)][key] for s in seeds if (c, s) in diffs and
                 diffs[(c, s)][key] is not None]
            cells.append(f"{statistics.mean(v):+.2f}% (max {max(abs(x) for x in v):.2f}%)"
                         if v else "")
        lines.append(f"| {NAMES[c]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def moving_mean(xs, n):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x - (xs[i - n] if i >= n else 0.0)
        out.append(acc / min(i + 1, n))
    return out


def plot(runs, tail, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    seeds = sorted({s for _, s in runs})
    fig, axes = plt.subplots(2, len(seeds), figsize=(6 * len(seeds), 8), squeeze=False)
    for col, s in enumerate(seeds):
        for c in NAMES:
            r = runs.get((c, s))
            if r is None:
                continue
            curve = moving_mean(r["train_loss"], tail)
            for row, start in ((0, 0), (1, max(0, len(curve) - 100))):
                axes[row][col].plot(range(start, len(curve)), curve[start:], lw=1, label=NAMES[c])
        any_run = next(r for (c, x), r in runs.items() if x == s)
        st = any_run["settings"]
        axes[0][col].set_title(f"seed {s}: d={st['d']}, {st['layers']} layers, "
                               f"{st['steps']} steps, 4 ranks / 2 nodes")
        axes[1][col].set_title(f"seed {s}: the last 100 steps")
        for row in (0, 1):
            axes[row][col].set_xlabel("step")
            axes[row][col].set_ylabel(f"train loss ({tail}-step mean, nats/byte)")
        axes[0][col].legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
    fig.savefig(png, dpi=90)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(here, "results"))
    ap.add_argument("--png", default=os.path.join(here, "..", "results", "fsdp2_parity.png"))
    ap.add_argument("--tail", type=int, default=20)
    args = ap.parse_args()
    runs = load(args.results)
    print(table(runs, args.tail))
    plot(runs, args.tail, args.png)


if __name__ == "__main__":
    main()
