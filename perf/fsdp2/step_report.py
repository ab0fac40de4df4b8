#!/usr/bin/env python3
"""Summarizes perf/fsdp2/emulated_steps.sh's JSON lines as Markdown (printed):

    python3 perf/fsdp2/step_report.py perf/fsdp2/results/emulated_steps.jsonl ["extra args"]

Per link rate: the median step time of each config over the rounds (each round's figure is
step_time.py's median over its timed steps), the ratios the issue asks for, each as the ratio
of the medians with the range of the per-round ratios (a ratio taken within one round compares
runs made minutes apart), and the inter-node bytes per step (veth: every node's zc0 transmit
count; zcoll: its own payload count), with the ZeRO++ / gloo ratio.
"""
import json
import statistics
import sys

CONFIGS = ("floor", "gloo", "zcoll", "zeropp")


def per_round(rows, rate, config, key="median_s"):
    return {r["round"]: r[key] for r in rows if r["rate"] == rate and r["config"] == config}


def ratio(rows, rate, num, den):
    """num's step over den's: the ratio of the medians over rounds, and the per-round range."""
    a, b = per_round(rows, rate, num), per_round(rows, rate, den)
    each = [a[k] / b[k] for k in sorted(a.keys() & b.keys())]
    mid = statistics.median(a.values()) / statistics.median(b.values())
    return f"**{mid:.2f}x** ({min(each):.2f}-{max(each):.2f})"


def bytes_per_step(rows, rate, config, key):
    values = list(per_round(rows, rate, config, key).values())
    return statistics.median(values) if values else None


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    extra = sys.argv[2] if len(sys.argv) > 2 else ""
    rates = sorted({r["rate"] for r in rows}, key=lambda s: float(s.rstrip("gbit")))
    rounds = len({r["round"] for r in rows})
    s = rows[0]["settings"]
    loads = [float(r["load"].split()[0]) for r in rows]
    out = [f"FSDP2 step, 2 nodes x 2 ranks, {rows[0]['params'] / 1e6:.1f} M fp32 parameters "
           f"(d={s['d']}, {s['layers']} layers, batch {s['batch']}x{s['ctx']} per rank), "
           f"{s['steps']} timed steps after {s['warmup']} warm-up per run, median over {rounds} "
           f"interleaved rounds; extra args: '{extra}'. 1-minute load average before the runs: "
           f"{min(loads):.2f}-{max(loads):.2f}.", "",
           "| link | floor (s) | FSDP2+gloo (s) | FSDP2+zcoll (s) | ZeRO++ (s) | ZeRO++ / floor | "
           "gloo / ZeRO++ | gloo / zcoll | gloo / floor (the most any backend gains) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for rate in rates:
        med = {c: statistics.median(per_round(rows, rate, c).values()) for c in CONFIGS}
        out.append(f"| {rate} | {med['floor']:.3f} | {med['gloo']:.3f} | {med['zcoll']:.3f} | "
                   f"{med['zeropp']:.3f} | {ratio(rows, rate, 'zeropp', 'floor')} | "
                   f"{ratio(rows, rate, 'gloo', 'zeropp')} | {ratio(rows, rate, 'gloo', 'zcoll')} "
                   f"| {ratio(rows, rate, 'gloo', 'floor')} |")
    out += ["", "Inter-node bytes per step (MB; veth: zc0 transmit bytes of both nodes, TCP/IP "
            "headers and the barriers included; zcoll: `zcoll.get_stats` bytes_sent_inter "
            "summed over ranks and groups, payload only):", "",
            "| link | floor (veth) | gloo (veth) | zcoll (veth / zcoll) | ZeRO++ (veth / zcoll) | "
            "ZeRO++ / gloo (veth) | rank 0 CPU s per step: floor, gloo, zcoll, ZeRO++ |",
            "|---|---|---|---|---|---|---|"]
    for rate in rates:
        veth = {c: bytes_per_step(rows, rate, c, "veth_bytes_per_step") for c in CONFIGS}
        own = {c: bytes_per_step(rows, rate, c, "zcoll_inter_bytes_per_step")
               for c in ("zcoll", "zeropp")}
        cpu = [statistics.median(per_round(rows, rate, c, "cpu_s").values()) for c in CONFIGS]
        out.append(f"| {rate} | {veth['floor'] / 1e6:.3f} | {veth['gloo'] / 1e6:.2f} | "
                   f"{veth['zcoll'] / 1e6:.2f} / {own['zcoll'] / 1e6:.2f} | "
                   f"{veth['zeropp'] / 1e6:.2f} / {own['zeropp'] / 1e6:.2f} | "
                   f"**{veth['zeropp'] / veth['gloo']:.3f}x** | "
                   f"{', '.join(f'{c:.2f}' for c in cpu)} |")
    out += ["", "Brackets: the range of the per-round ratios."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
