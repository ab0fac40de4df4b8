#!/usr/bin/env python3
"""The torch backend's overhead: dist.all_gather_into_tensor on the zcoll backend vs zcoll's own
all_gather_perf, same ranks, same sizes (nccl-tests sizes: the whole gathered buffer), run one
after the other on this machine, --rounds times alternating which goes first (so drift on a
shared machine hits both alike). Prints a Markdown table: per size the median over rounds of
each side's mean time, the ratio of the medians and the range of the per-round ratios.

The torch side is also timed one layer down, in the same processes: the zcoll backend object's
own `_allgather_base(...).wait()` (zcoll.zeropp.zcoll_backend(): no torch.distributed Python
wrapper, no ProcessGroup dispatch). The difference between the two torch columns is torch's own
cost per call, which no backend can remove.

  python3 perf/zero_train/backend_overhead.py --world 4 --sizes 1M,64M --rounds 5
"""
import statistics
import argparse
import os
import re
import subprocess
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def torch_worker(rank, world, path, sizes, iters, warmup, queue):
    import zcoll.zeropp
    torch.set_num_threads(1)
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world)
    backend = zcoll.zeropp.zcoll_backend()
    calls = {"torch": dist.all_gather_into_tensor,
             "backend": lambda out, shard: backend._allgather_base(out, shard).wait()}
    result = {}
    for size in sizes:
        out = torch.empty(size // 4)
        shard = torch.ones(size // 4 // world)
        for name, call in calls.items():
            for _ in range(warmup):
                call(out, shard)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):  # back to back, as all_gather_perf times them
                call(out, shard)
            result[(name, size)] = (time.perf_counter() - t0) / iters
    if rank == 0:
        queue.put(result)
    dist.destroy_process_group()


def torch_times(world, sizes, iters, warmup):
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        procs = mp.start_processes(torch_worker, args=(world, os.path.join(d, "s"), sizes, iters,
                                                       warmup, q),
                                   nprocs=world, join=False, start_method="spawn")
        result = q.get()
        while not procs.join():
            pass
    return result


def perf_times(world, sizes, iters, warmup):
    """all_gather_perf's out-of-place time column (us), per size."""
    result = {}
    for size in sizes:
        cmd = [os.path.join(ROOT, "tools", "zcollrun"), "-n", str(world), "--",
               os.path.join(ROOT, "build", "perf", "all_gather_perf"), "-b", str(size), "-e",
               str(size), "-n", str(iters), "-w", str(warmup), "-c", "0"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            fields = re.sub(r"^\[\d+\]\s*", "", line).split()
            if fields and fields[0] == str(size):
                result[size] = float(fields[5]) * 1e-6  # nccl-tests: size count type redop root time
                break
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--sizes", default="1M,64M")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    rounds = {"torch": [], "perf": []}
    for r in range(args.rounds):
        order = ["torch", "perf"] if r % 2 == 0 else ["perf", "torch"]
        for side in order:
            run = torch_times if side == "torch" else perf_times
            rounds[side].append(run(args.world, sizes, args.iters, args.warmup))
    print(f"{args.world} ranks, {args.iters} calls per size, {args.rounds} rounds")
    print("| size (gathered) | all_gather_perf ms | torch zcoll backend ms | torch / zcoll "
          "(medians) | per-round ratios | backend object ms | torch's own cost ms |")
    print("|---|---|---|---|---|---|---|")
    for s in sizes:
        tp = [x[s] for x in rounds["perf"]]
        tt = [x[("torch", s)] for x in rounds["torch"]]
        tb = [x[("backend", s)] for x in rounds["torch"]]
        ratios = sorted(b / a for a, b in zip(tp, tt))
        print(f"| {size_label(s)} | {statistics.median(tp) * 1e3:.3f} | "
              f"{statistics.median(tt) * 1e3:.3f} | "
              f"{statistics.median(tt) / statistics.median(tp):.2f} | "
              f"{ratios[0]:.2f}-{ratios[-1]:.2f} | {statistics.median(tb) * 1e3:.3f} | "
              f"{statistics.median([t - b for t, b in zip(tt, tb)]) * 1e3:.3f} |")


if __name__ == "__main__":
    main()
