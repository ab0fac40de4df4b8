#!/usr/bin/env python3
"""Plot the intra-node comparison table that perf/peers/intra_node.sh writes.

    python3 perf/peers/plot_intra_node.py [IN.md [OUT.png]]
        (default perf/results/intra_node.md -> perf/results/intra_node.png)

Reads the Markdown table by its header names: the key columns "collective", "ranks", "per rank"
("1 MiB", ...) and, if present, "place" ("out" / "in"); every other column without a "/" in its
name is a library's bus bandwidth in GB/s ("-" = not measured); "x / y" columns are ratios and
are skipped. Draws one subplot per (collective, ranks): x = size per rank (log2), y = busbw, one
colour per library, out of place solid, in place dashed. Exits 1 with a message if the table is
missing or malformed. Needs matplotlib (python3 -m pip install matplotlib).
"""
import math
import re
import sys

KEYS = ("collective", "ranks", "per rank")
UNITS = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}


def fail(msg):
    sys.exit(f"plot_intra_node.py: {msg}")


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse(path):
    """Rows of {header: cell} from every Markdown table in path."""
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    rows, header = [], None
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            header = None
        elif header is None:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if re.fullmatch(r"\s*\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*", nxt):
                header = [h if h.lower() not in KEYS + ("place",) else h.lower()
                          for h in cells(line)]
        elif not re.fullmatch(r"[\s|:-]*", line):
            c = cells(line)
            if len(c) != len(header):
                fail(f"{path}:{i + 1}: {len(c)} cells, the header has {len(header)}")
            rows.append((i + 1, dict(zip(header, c))))
    if not rows:
        fail(f"no Markdown table with rows in {path}")
    return rows


def mib(text, where):
    m = re.fullmatch(r"([\d.]+)\s*(KiB|MiB|GiB)", text)
    if not m:
        fail(f"{where}: size {text!r} is not like '4 MiB'")
    return float(m.group(1)) * UNITS[m.group(2)]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "perf/results/intra_node.md"
    dst = sys.argv[2] if len(sys.argv) > 2 else re.sub(r"\.md$", "", src) + ".png"
    rows = parse(src)
    header = list(rows[0][1])
    missing = [k for k in KEYS if k not in header]
    if missing:
        fail(f"{src}: table lacks column(s) {', '.join(missing)} (has: {', '.join(header)})")
    libs = [h for h in header if h not in KEYS + ("place",) and "/" not in h]
    if not libs:
        fail(f"{src}: table has no library columns")

    # series[(collective, ranks)][(library, place)] = [(MiB, GB/s), ...]
    series, sizes = {}, set()
    for n, r in rows:
        where = f"{src}:{n}"
        try:
            key = (r["collective"], int(r["ranks"]))
        except ValueError:
            fail(f"{where}: ranks {r['ranks']!r} is not an integer")
        size = mib(r["per rank"], where)
        sizes.add(size)
        for lib in libs:
            if r[lib] in ("-", ""):
                continue
            try:
                bw = float(r[lib])
            except ValueError:
                fail(f"{where}: {lib} {r[lib]!r} is not a number")
            series.setdefault(key, {}).setdefault((lib, r.get("place", "out")), []).append((size, bw))
    if not series:
        fail(f"{src}: no bandwidth values")

    try:
        import matplotlib
    except ImportError:
        fail("matplotlib is not installed (python3 -m pip install matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colls = list(dict.fromkeys(k[0] for k in series))
    ranks = sorted({k[1] for k in series})
    fig, axes = plt.subplots(len(colls), len(ranks), figsize=(5.5 * len(ranks), 3.6 * len(colls)),
                             squeeze=False, sharex=True)
    colour = {lib: f"C{i}" for i, lib in enumerate(libs)}
    style = {"out": "-", "in": "--"}
    placename = {"out": "out of place", "in": "in place"}
    ticks = sorted(sizes)
    handles = {}  # (library, place) -> line
    labels = [f"{s:g}M" if s >= 1 else f"{s * 1024:g}K" for s in ticks]
    for (i, coll), (j, n) in ((a, b) for a in enumerate(colls) for b in enumerate(ranks)):
        ax = axes[i][j]
        for (lib, place), pts in series.get((coll, n), {}).items():
            pts.sort()
            handles[lib, place], = ax.plot([p[0] for p in pts], [p[1] for p in pts],
                                           style.get(place, ":"), marker="o", ms=3, color=colour[lib])
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, labels)
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.set_title(f"{coll}, {n} ranks")
        if j == 0:
            ax.set_ylabel("bus bandwidth (GB/s)")
        if i == len(colls) - 1:
            ax.set_xlabel("size per rank")
    order = sorted(handles, key=lambda k: (libs.index(k[0]), k[1] != "out"))
    fig.legend([handles[k] for k in order], [f"{k[0]} ({placename.get(k[1], k[1])})" for k in order],
               loc="lower center", ncol=min(4, math.ceil(len(order) / 2)), frameon=False)
    fig.suptitle("Intra-node collectives: bus bandwidth vs size per rank (float sum, one node)")
    fig.tight_layout(rect=(0, 0.07, 1, 0.97))
    fig.savefig(dst, dpi=100)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
