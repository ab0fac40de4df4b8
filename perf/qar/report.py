#!/usr/bin/env python3
"""The Markdown table of perf/qar/emulated_allreduce.sh's output (printed):

    python3 perf/qar/report.py perf/qar/results/emulated_allreduce_<date>_<rate>.txt

Per size: each mode's out-of-place time per call (max over ranks) in every round, the exact
all-reduce's time over each quantized mode's (the speed-up: median over rounds, with the range
of the per-round ratios: a ratio within one round compares runs made a minute apart), the wire
and inter-node bytes a rank sends per call (max over ranks), the largest element error against
the documented bound's check (#wrong over both halves) and whether every rank's output held the
same bits (the `same` column of both halves).
"""
import re
import statistics
import sys


def parse(path):
    rows, mode, rnd = {}, None, None
    for line in open(path):
        m = re.match(r"=== round (\d+) mode (\w+)", line)
        if m:
            rnd, mode = int(m.group(1)), m.group(2)
            continue
        f = line.split()
        if mode is None or len(f) < 10 or f[0] != "[0]" or not f[1].isdigit():
            continue
        f = f[1:]
        half = (len(f) - 5) // 2
        oop, inp = f[5:5 + half], f[5 + half:]
        r = {"time_us": float(oop[0]), "wrong": int(oop[3]) + int(inp[3])}
        if half >= 7:
            r.update(wire=float(oop[4]), inter=float(oop[5]), maxerr=oop[6])
        if half >= 8:
            r["same"] = oop[7] == "yes" and inp[7] == "yes"
        rows[(rnd, mode, int(f[0]))] = r
    return rows


def main():
    rows = parse(sys.argv[1])
    sizes = sorted({s for _, _, s in rows})
    rounds = sorted({r for r, _, _ in rows})
    modes = [m for m in ("exact", "int8", "int4") if any(k[1] == m for k in rows)]
    print("| size | " + " | ".join(f"{m} ms" for m in modes)
          + " | exact/int8 | exact/int4 | inter B exact / int8 / int4 | maxerr int8 / int4 |"
          " #wrong | same bits |")
    print("|---|" + "---|" * len(modes) + "---|---|---|---|---|---|")
    for s in sizes:
        t = {m: [rows[(r, m, s)]["time_us"] / 1e3 for r in rounds if (r, m, s) in rows]
             for m in modes}
        cells = [", ".join(f"{x:.1f}" for x in t[m]) for m in modes]

        def speedup(q):
            each = [rows[(r, "exact", s)]["time_us"] / rows[(r, q, s)]["time_us"] for r in rounds
                    if (r, "exact", s) in rows and (r, q, s) in rows]
            if not each:
                return "-"
            mid = statistics.median(t["exact"]) / statistics.median(t[q])
            return f"**{mid:.2f}x** ({min(each):.2f}-{max(each):.2f})"

        first = {m: next((rows[(r, m, s)] for r in rounds if (r, m, s) in rows), {})
                 for m in modes}
        inter = " / ".join(f"{first[m].get('inter', float('nan')):.0f}" for m in modes)
        err = " / ".join(first[m].get("maxerr", "-") for m in modes if m != "exact")
        wrong = sum(rows[k]["wrong"] for k in rows if k[2] == s)
        same = [rows[k].get("same") for k in rows if k[2] == s and "same" in rows[k]]
        print(f"| {s >> 20} MiB | " + " | ".join(cells) + f" | {speedup('int8')} | "
              f"{speedup('int4')} | {inter} | {err} | {wrong} | "
              f"{'yes' if same and all(same) else 'no' if same else '-'} ({len(same)} runs) |")


if __name__ == "__main__":
    main()
