#!/usr/bin/env python3
"""Draws the plots of perf/RESULTS.md from the data files committed under perf/.

    python3 perf/plot_results.py extract   # the tables and logs -> perf/results/*.csv
    python3 perf/plot_results.py           # perf/results/*.csv, *.jsonl -> perf/results/*.png

`extract` turns measurements kept as Markdown tables or program output into CSV files, which
are committed next to them:

- perf/results/intra_node.md, intra_node_2026-11-27_run{2,3}.md (three runs of
  perf/peers/intra_node.sh) -> perf/results/intra_node_busbw.csv: one row per run, collective,
  ranks, size per rank and place, with each library's bus bandwidth (GB/s) and the memory bound;
  and perf/results/intra_node_ratios.csv: per case, the median, lowest and highest over the three
  runs of the ratios zcoll / Open MPI and zcoll / Gloo, which perf/RESULTS.md quotes: where the
  tables have the ratio (`shm / MPI`, `registered / MPI`, `shm / Gloo`) the median of the three
  runs' ratios; else (registered / Gloo, registered / shm) the quotient of the median busbw
  (as perf/LOG.md computed "registered / ordinary"), with the lowest and highest run's quotient;
- perf/results/zero_step_emulated_*.txt (zero_step_perf on tools/emulate_cluster.sh) ->
  perf/results/zero_step_links.csv: one row per run with the ZeRO-3 and ZeRO++ step (ms).

The plots (no number is computed that the page does not show; medians and ranges only):

- busbw_vs_size.png: bus bandwidth against size per rank, one panel per collective and rank
  count, out of place: zcoll over shm, zcoll on registered buffers, zcoll over UCX, Open MPI,
  Gloo and the memory bound; the median of the three runs, bars from the lowest to the highest;
- step_vs_link.png: step time against link rate (1 and 10 Gbit/s), three panels:
  zero_step_perf's ZeRO-3 and ZeRO++ steps (perf/results/zero_step_links.csv), the training step
  of perf/zero_train (gloo ZeRO-3, zcoll ZeRO-3, zcoll ZeRO++, the floor;
  perf/results/emulated_steps_2026-11-24.jsonl) and FSDP2's step (gloo, zcoll, zcoll.fsdp's
  ZeRO++, the floor; perf/fsdp2/results/emulated_steps.jsonl); each point the median over
  rounds of the run's median step, bars the range over rounds.

Needs matplotlib (only for the plots). Without a system one, install it into a directory of its
own and point PYTHONPATH at it, never globally:

    pip install --target /tmp/mpl matplotlib
    PYTHONPATH=/tmp/mpl python3 perf/plot_results.py
"""
import csv
import glob
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
INTRA_RUNS = [("1", "intra_node.md"), ("2", "intra_node_2026-11-27_run2.md"),
              ("3", "intra_node_2026-11-27_run3.md")]
INTRA_COLUMNS = [("zcoll shm", "zcoll_shm"), ("zcoll shm registered", "zcoll_registered"),
                 ("zcoll ucx", "zcoll_ucx"), ("Open MPI", "openmpi"), ("Gloo", "gloo"),
                 ("memory bound", "bound")]
SIZE_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def markdown_rows(path):
    """The rows of the first Markdown table in path, as dicts keyed by the header."""
    header, rows = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("|"):
                if header:
                    break
                continue
            cells = [c.strip() for c in line.strip("|").split("|")]
            if header is None:
                header = cells
            elif not set(line) <= set("|-: "):
                rows.append(dict(zip(header, cells)))
    return rows


def size_bytes(text):
    number, unit = text.split()
    return int(float(number) * SIZE_UNITS[unit])


def extract_intra_node():
    out = os.path.join(RESULTS, "intra_node_busbw.csv")
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "source", "collective", "ranks", "bytes_per_rank", "place"] +
                   [name for _, name in INTRA_COLUMNS])
        for run, name in INTRA_RUNS:
            for row in markdown_rows(os.path.join(RESULTS, name)):
                values = [row[title] if row[title] != "-" else "" for title, _ in INTRA_COLUMNS]
                w.writerow([run, "perf/results/" + name, row["collective"], row["ranks"],
                            size_bytes(row["per rank"]), row["place"]] + values)
    print("wrote", out)
    extract_intra_node_ratios()


RATIOS = [("shm_vs_mpi", "shm / MPI", None), ("registered_vs_mpi", "registered / MPI", None),
          ("shm_vs_gloo", "shm / Gloo", None),
          ("registered_vs_gloo", None, ("zcoll shm registered", "Gloo")),
          ("registered_vs_shm", None, ("zcoll shm registered", "zcoll shm"))]


def ratio(row, column, quotient):
    if column:
        return float(row[column]) if row[column] not in ("-", "") else None
    a, b = (row[c] for c in quotient)
    return float(a) / float(b) if "-" not in (a, b) and float(b) > 0 else None


def extract_intra_node_ratios():
    runs = [markdown_rows(os.path.join(RESULTS, name)) for _, name in INTRA_RUNS]
    out = os.path.join(RESULTS, "intra_node_ratios.csv")
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        header = ["collective", "ranks", "bytes_per_rank", "place"]
        for name, _, _ in RATIOS:
            header += [name + "_median", name + "_min", name + "_max"]
        w.writerow(header)
        for first in runs[0]:
            key = (first["collective"], first["ranks"], first["per rank"], first["place"])
            rows = [r for run in runs for r in run
                    if (r["collective"], r["ranks"], r["per rank"], r["place"]) == key]
            line = [key[0], key[1], size_bytes(key[2]), key[3]]
            for _, column, quotient in RATIOS:
                values = [v for v in (ratio(r, column, quotient) for r in rows) if v is not None]
                if not values:
                    line += ["", "", ""]
                    continue
                middle, low, high = median_and_range(values)
                if quotient:  # the quotient of the medians, as perf/LOG.md's "registered / ordinary"
                    a, b = ([float(r[c]) for r in rows] for c in quotient)
                    middle = statistics.median(a) / statistics.median(b)
                line += ["%.2f" % x for x in (middle, low, high)]
            w.writerow(line)
    print("wrote", out)


def extract_zero_step():
    out = os.path.join(RESULTS, "zero_step_links.csv")
    step = re.compile(r"\]\s+(ZeRO-3|ZeRO\+\+)\s+step\s+([0-9.]+)")
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "layout", "rate", "run", "zero3_ms", "zeropp_ms"])
        for path in sorted(glob.glob(os.path.join(RESULTS, "zero_step_emulated_*.txt"))):
            key, times = None, {}
            for line in list(open(path)) + ["## end"]:
                if line.startswith("## "):
                    if key and len(times) == 2:
                        w.writerow(["perf/results/" + os.path.basename(path)] + list(key) +
                                   [times["ZeRO-3"], times["ZeRO++"]])
                    fields = dict(kv.split("=") for kv in line[3:].split() if "=" in kv)
                    key = (fields.get("layout"), fields.get("rate"), fields.get("run"))
                    times = {}
                    continue
                m = step.search(line)
                if m:
                    times[m.group(1)] = m.group(2)
    print("wrote", out)


def median_and_range(values):
    return statistics.median(values), min(values), max(values)


def plot_busbw(plt):
    rows = list(csv.DictReader(open(os.path.join(RESULTS, "intra_node_busbw.csv"))))
    collectives = ["allgather", "reduce_scatter", "allreduce"]
    libraries = [("zcoll_registered", "zcoll, registered buffers", "C0", "o-"),
                 ("zcoll_shm", "zcoll (shm)", "C1", "s-"),
                 ("zcoll_ucx", "zcoll over UCX", "C4", "^:"),
                 ("openmpi", "Open MPI 4.1 (vader)", "C2", "D-"),
                 ("gloo", "Gloo (TCP loopback)", "C3", "v-"),
                 ("bound", "memory bound", "0.5", "--")]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), sharex=True)
    for col, coll in enumerate(collectives):
        for row_index, ranks in enumerate(["2", "4"]):
            ax = axes[row_index][col]
            cells = [r for r in rows if r["collective"] == coll and r["ranks"] == ranks
                     and r["place"] == "out"]
            sizes = sorted({int(r["bytes_per_rank"]) for r in cells})
            for key, label, color, style in libraries:
                xs, ys, lo, hi = [], [], [], []
                for s in sizes:
                    v = [float(r[key]) for r in cells if int(r["bytes_per_rank"]) == s and r[key]]
                    if v:
                        m, a, b = median_and_range(v)
                        xs.append(s / (1 << 20)); ys.append(m); lo.append(m - a); hi.append(b - m)
                if xs:
                    ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, color=color, label=label,
                                capsize=3, markersize=4)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{coll}, {ranks} ranks, out of place")
            ax.set_xticks([1, 4, 16, 64], ["1", "4", "16", "64"])
            if col == 0:
                ax.set_ylabel("busbw (GB/s)")
            if row_index == 1:
                ax.set_xlabel("size per rank (MiB)")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("One node, float sum: median of 3 runs of perf/peers/intra_node.sh "
                 "(2026-11-27, 2-vCPU AMD EPYC VM), bars: lowest to highest run")
    fig.tight_layout()
    out = os.path.join(RESULTS, "busbw_vs_size.png")
    fig.savefig(out, dpi=90)
    print("wrote", out)


def jsonl(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def plot_steps(ax, records, series, title, unit_scale=1.0, ylabel="step (s)"):
    """series: (label in the records, legend, colour, style); records: label, rate, value."""
    rates = ["1gbit", "10gbit"]
    for key, legend, color, style in series:
        xs, ys, lo, hi = [], [], [], []
        for x, rate in zip([1, 10], rates):
            v = [r["value"] * unit_scale for r in records if r["label"] == key and r["rate"] == rate]
            if v:
                m, a, b = median_and_range(v)
                xs.append(x); ys.append(m); lo.append(m - a); hi.append(b - m)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, color=color, label=legend, capsize=3)
    ax.set_xscale("log")
    ax.set_xticks([1, 10], ["1 Gbit/s", "10 Gbit/s"])
    ax.set_xlim(0.7, 14)
    ax.set_ylim(bottom=0)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def plot_step_vs_link(plt):
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    zs = list(csv.DictReader(open(os.path.join(RESULTS, "zero_step_links.csv"))))
    records = []
    for r in zs:
        if r["layout"] == "2x2":
            records.append({"label": "zero3", "rate": r["rate"], "value": float(r["zero3_ms"])})
            records.append({"label": "zeropp", "rate": r["rate"], "value": float(r["zeropp_ms"])})
    plot_steps(axes[0], records,
               [("zero3", "ZeRO-3 (ring all-gather, reduce-scatter)", "C3", "v-"),
                ("zeropp", "ZeRO++ (hpZ INT8 rail, qgZ INT4)", "C0", "o-")],
               "zero_step_perf, 16M bf16 parameters, 2 nodes x 2\n"
               "2026-11-27, Intel Xeon (AVX-512), 3 runs", ylabel="step (ms)")
    train = [{"label": r["label"], "rate": r["rate"], "value": r["median_s"]}
             for r in jsonl(os.path.join(RESULTS, "emulated_steps_2026-11-24.jsonl"))]
    plot_steps(axes[1], train,
               [("gloo_zero3", "gloo ZeRO-3", "C3", "v-"),
                ("zcoll_zero3", "zcoll ZeRO-3", "C1", "s-"),
                ("zcoll_zeropp", "zcoll ZeRO++", "C0", "o-"),
                ("floor", "floor (no communication)", "0.5", "--")],
               "training step (torch backend), 12.9M fp32 parameters, 2 x 2\n"
               "2026-11-24, AMD EPYC, 3 rounds")
    fsdp = [{"label": r["label"], "rate": r["rate"], "value": r["median_s"]}
            for r in jsonl(os.path.join(HERE, "fsdp2", "results", "emulated_steps.jsonl"))]
    plot_steps(axes[2], fsdp,
               [("gloo", "FSDP2 on gloo", "C3", "v-"),
                ("zcoll", "FSDP2 on zcoll", "C1", "s-"),
                ("zeropp", "FSDP2 + zcoll.fsdp.zeropp()", "C0", "o-"),
                ("floor", "floor (no communication)", "0.5", "--")],
               "FSDP2 step, 12.8M fp32 parameters, 2 x 2\n"
               "2026-11-27 01:20, AMD EPYC, loaded (3.3-8.9), 3 rounds")
    fig.suptitle("Step time vs inter-node link rate (tools/emulate_cluster.sh); "
                 "points: median over rounds, bars: range")
    fig.tight_layout()
    out = os.path.join(RESULTS, "step_vs_link.png")
    fig.savefig(out, dpi=90)
    print("wrote", out)


def main(argv):
    if argv[1:] == ["extract"]:
        extract_intra_node()
        extract_zero_step()
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
    except ImportError:
        print("plot_results.py: matplotlib is missing; see the header of this script "
              "(pip install --target /tmp/mpl matplotlib; PYTHONPATH=/tmp/mpl)", file=sys.stderr)
        return 1
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plot_busbw(plt)
    plot_step_vs_link(plt)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
