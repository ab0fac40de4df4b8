#!/usr/bin/env python3
"""Time one ZeRO-3 / ZeRO++ training step (train_parity.py's zero_step) per rank process.

Run one process per rank under a launcher that sets RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and
ZCOLL_COMM_ID (tools/emulate_cluster.sh does; emulated_steps.sh drives it). torch's store
listens on ZCOLL_COMM_ID's host at its port + 1 (the launcher's one address; the zcoll backend
itself passes its unique id through that store). gloo is pinned to the interface in
GLOO_SOCKET_IFNAME (zc0 under emulate_cluster), so its bytes cross the same rate-limited link.

  --impl torch --backend gloo --variant zero3     torch + gloo ZeRO-3
  --impl zcoll --backend zcoll --variant zero3    torch + zcoll ZeRO-3 (standard collectives)
  --impl zcoll --backend zcoll --variant zeropp   torch + zcoll ZeRO++ (qwZ INT8 + hpZ + qgZ INT4)
  --impl none --variant zero3                     the step's floor: its compute and the writes of
                                                  the gathered and reduced tensors, without any
                                                  communication (what no backend can go below)

Rank 0 prints one JSON line: the median and mean step time over --steps timed steps (after
--warmup), each step bracketed by barriers so the slowest rank sets it.
"""
import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_parity as tp  # noqa: E402


COLLECTIVES = ("all_gather", "reduce_scatter_avg", "qwz_hpz_gather", "gather_from_secondary",
               "qgz_reduce_scatter_avg")


class LocalComms(tp.Comms):
    """ZeRO-3's collectives without communication: the gather writes a fresh full vector from
    a local copy of the parameters, the reduce-scatter averages this rank's own slice. The step
    keeps its compute, allocations and output writes, so its time is a floor for any backend."""

    def __init__(self, world, local, args, full):
        super().__init__(world, local, args)
        self.full = full

    def all_gather(self, shard):
        return torch.empty_like(self.full).copy_(self.full)

    def reduce_scatter_avg(self, full):
        c = full.numel() // self.world
        return full[self.rank * c:(self.rank + 1) * c] / self.world


def time_phases(comms):
    """Wraps the step's collectives (synchronous calls) with wall-clock timers; returns
    {name: [seconds per call]}, filled as the steps run."""
    phases = {}

    def timed(name, fn):
        def call(*a, **kw):
            dist.barrier()  # the collective's own time, not the wait for the slowest rank
            t0 = time.perf_counter()
            result = fn(*a, **kw)
            phases.setdefault(name, []).append(time.perf_counter() - t0)
            return result
        return call

    for name in COLLECTIVES:
        if hasattr(comms, name):
            setattr(comms, name, timed(name, getattr(comms, name)))
    return phases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", choices=["torch", "zcoll", "none"], default="torch")
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--variant", choices=["zero3", "zeropp"], default="zero3")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=32)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--qwz-bits", type=int, default=8)
    ap.add_argument("--qgz-bits", type=int, default=4)
    ap.add_argument("--label", default="")
    ap.add_argument("--phases", action="store_true",
                    help="also report the median time of each collective of the step")
    args = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    host, port = os.environ["ZCOLL_COMM_ID"].rsplit(":", 1)
    torch.set_num_threads(1)
    if args.backend == "zcoll":
        import zcoll  # noqa: F401
    store = dist.TCPStore(host, int(port) + 1, world, is_master=rank == 0,
                          timeout=timedelta(seconds=120))
    dist.init_process_group(args.backend, store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    torch.manual_seed(1)
    model = tp.ByteLM(args.d, args.layers, args.heads, args.ctx)
    shapes, total, padded = tp.flat_layout(model, world, args.block)
    init = torch.zeros(padded)
    init[:total] = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    if args.impl == "none":
        if args.variant != "zero3":
            ap.error("--impl none times ZeRO-3's step without communication: use --variant zero3")
        comms = LocalComms(world, local, args, init)
    else:
        comms = (tp.ZcollComms if args.impl == "zcoll" else tp.Comms)(world, local, args)
    phases = time_phases(comms) if args.phases else None
    for p in model.parameters():
        p.requires_grad_(False)
    c = padded // world
    shard = init[rank * c:(rank + 1) * c].clone()
    opt = torch.optim.AdamW([shard], lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    times, cpu = [], []
    for step in range(args.warmup + args.steps):
        x = torch.randint(0, 256, (args.batch, args.ctx), generator=g)
        y = torch.randint(0, 256, (args.batch, args.ctx), generator=g)
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        tp.zero_step(comms, model, shapes, shard, x, y, args.variant)
        opt.step()
        dist.barrier()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        elif phases:
            phases.clear()
    if rank == 0:
        print(json.dumps({"label": args.label, "backend": args.backend, "impl": args.impl,
                          "variant": args.variant, "params": total, "world": world,
                          "ranks_per_node": local, "median_s": statistics.median(times),
                          "mean_s": statistics.mean(times), "cpu_s": statistics.median(cpu),
                          "steps": len(times),
                          **({"phases_s": {name: statistics.median(ts)
                                           for name, ts in phases.items()}} if phases else {})}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
