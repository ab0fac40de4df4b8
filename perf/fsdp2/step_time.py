#!/usr/bin/env python3
"""Time one FSDP2 (fully_shard) training step per rank process, and count its inter-node bytes.

Run one process per rank under a launcher that sets RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE and ZCOLL_COMM_ID (tools/emulate_cluster.sh does; emulated_steps.sh drives it).
torch's store listens on ZCOLL_COMM_ID's host at its port + 1. gloo is pinned to the interface in
GLOO_SOCKET_IFNAME (zc0 under emulate_cluster), so its bytes cross the same rate-limited link.
The model is train_parity.py's GPT (tied embedding/head), fully_shard per block then on the root,
on a 1-D CPU mesh over all ranks; AdamW on the shards.

  --config gloo     FSDP2 on gloo (torch's default comm)
  --config zcoll    FSDP2 on zcoll, unquantized (torch's default comm on the zcoll group)
  --config zeropp   FSDP2 on zcoll with zcoll.fsdp.zeropp: qwZ INT8 forward gathers, hpZ
                    (reshard_after_forward = ranks per node: backward gathers on the node), qgZ
                    INT4 gradients (--qwz-bits / --qgz-bits change them)
  --config floor    the same step with no communication: FSDP2 on a gloo mesh whose comm objects
                    (set_custom_all_gather / set_custom_reduce_scatter, one per FSDP module) copy
                    locally: each gather writes the module's full flat parameters (gathered once,
                    in the first warm-up step, and replayed), each reduce-scatter scales this
                    rank's own slice. It keeps FSDP's copy-in/copy-out, the compute and the
                    writes of every gathered and reduced buffer: no backend's step goes below it.

Each step is bracketed by barriers (the slowest rank sets it); rank 0 prints one JSON line: the
median and mean step time over --steps timed steps (after --warmup), rank 0's CPU seconds per
step, rank 0's seconds per step in Python's garbage collector (`gc_s`; and its collections per
generation over the timed steps), and the inter-node bytes per timed step two ways: `veth_bytes_per_step`, the bytes every
node's zc0 interface transmitted (/proc/net/dev of each node's network namespace, summed over
the nodes: payload plus TCP/IP headers, barriers included; intra-node traffic never crosses zc0),
and for zcoll configs `zcoll_inter_bytes_per_step`, zcoll's own payload count (zcoll.get_stats,
bytes_sent_inter, summed over ranks and over the groups the step uses).
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_parity import GPT  # noqa: E402

try:
    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter
except ImportError:  # pragma: no cover - torch without FSDP2 comm hooks
    AllGather = ReduceScatter = object


class LocalAllGather(AllGather):
    """No communication: the first call gathers for real (through `group`, once, in warm-up)
    and keeps the result; every later call copies it into the output."""

    def __init__(self):
        self.full = None

    def allocate(self, size, *, dtype, device):
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, async_op=False):
        if self.full is None:
            dist.all_gather_into_tensor(output_tensor, input_tensor, group=group)
            self.full = output_tensor.clone()
        else:
            output_tensor.copy_(self.full)
        return None


class LocalReduceScatter(ReduceScatter):
    """No communication: this rank's slice of its own gradient, times FSDP's factor."""

    def allocate(self, size, *, dtype, device):
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, op=dist.ReduceOp.SUM,
                 async_op=False):
        import zcoll.fsdp as zf
        world, rank = group.size(), group.rank()
        c = output_tensor.numel()
        kind = zf._op_kind(op)
        scale = (1 / world if kind == dist.ReduceOp.AVG else
                 float(zf._premul_factor(op)) if kind == dist.ReduceOp.PREMUL_SUM else 1.0)
        torch.mul(input_tensor[rank * c:(rank + 1) * c], scale, out=output_tensor)
        return None


def wrap(model, config, mesh, args):
    from torch.distributed.fsdp import fully_shard
    if config == "zeropp":
        import zcoll.fsdp
        return zcoll.fsdp.zeropp(model, modules=model.blocks, mesh=mesh,
                                 weight_bits=args.qwz_bits, grad_bits=args.qgz_bits,
                                 grad_intra_bits=args.qgz_bits)
    for b in model.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if config == "floor":
        from torch.distributed.fsdp import FSDPModule
        for m in model.modules():
            if isinstance(m, FSDPModule):
                m.set_custom_all_gather(LocalAllGather())
                m.set_custom_reduce_scatter(LocalReduceScatter())
    return model


def veth_tx_bytes(ifname="zc0"):
    """Bytes this network namespace's `ifname` has transmitted (0 when it has none)."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == ifname:
                return int(rest.split()[8])
    return 0


class GcClock:
    """Seconds the Python garbage collector ran, and its collections per generation, on this
    process's main thread (gc.callbacks), from when counting starts."""

    def __init__(self):
        self.seconds, self.collections, self.counting, self.t0 = 0.0, [0, 0, 0], False, 0.0
        gc.callbacks.append(self.callback)

    def callback(self, phase, info):
        if not self.counting:
            return
        if phase == "start":
            self.t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self.t0
            self.collections[info["generation"]] += 1


def zcoll_inter_bytes(groups):
    import zcoll
    return sum(zcoll.get_stats(g)["bytes_sent_inter"] for g in groups)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=["gloo", "zcoll", "zeropp", "floor"], required=True)
    # the sizes of perf/zero_train/step_time.py's DeepSpeed-style step, so the two compare
    for name, default in (("steps", 6), ("warmup", 2), ("batch", 2), ("ctx", 32), ("d", 512),
                          ("layers", 4), ("heads", 8), ("qwz-bits", 8), ("qgz-bits", 4)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--label", default="")
    args = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    host, port = os.environ["ZCOLL_COMM_ID"].rsplit(":", 1)
    torch.set_num_threads(1)
    backend = "zcoll" if args.config in ("zcoll", "zeropp") else "gloo"
    if backend == "zcoll":
        import zcoll  # noqa: F401
    store = dist.TCPStore(host, int(port) + 1, world, is_master=rank == 0,
                          timeout=timedelta(seconds=120))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    from torch.distributed.device_mesh import init_device_mesh
    torch.manual_seed(1)
    model = GPT(args.d, args.layers, args.heads, args.ctx)
    params = sum(p.numel() for p in model.parameters())
    model = wrap(model, args.config, init_device_mesh("cpu", (world,)), args)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    times, cpu = [], []
    groups = [dist.group.WORLD]
    gc_clock = GcClock()
    for step in range(args.warmup + args.steps):
        if step == args.warmup:  # counters start with the timed steps
            if backend == "zcoll":
                import zcoll.fsdp
                groups += [x for x in zcoll.fsdp.backward_gather_groups(model)
                           if x.size() < world]
                zcoll_before = zcoll_inter_bytes(groups)
            dist.barrier()
            veth_before = veth_tx_bytes()
            gc_clock.counting = True
        x = torch.randint(0, 256, (args.batch, args.ctx), generator=g)
        y = torch.randint(0, 256, (args.batch, args.ctx), generator=g)
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        dist.barrier()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    # one rank per node reads its namespace's zc0; zcoll's counters are per rank
    counts = torch.tensor([veth_tx_bytes() - veth_before if local_rank == 0 else 0,
                           zcoll_inter_bytes(groups) - zcoll_before if backend == "zcoll" else 0],
                          dtype=torch.float64)
    dist.all_reduce(counts)
    if rank == 0:
        print(json.dumps({"label": args.label or args.config, "config": args.config,
                          "backend": backend, "params": params, "world": world,
                          "ranks_per_node": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
                          "median_s": statistics.median(times), "mean_s": statistics.mean(times),
                          "cpu_s": statistics.median(cpu), "steps": len(times),
                          "gc_s": gc_clock.seconds / len(times),
                          "gc_collections": gc_clock.collections,
                          "veth_bytes_per_step": counts[0].item() / len(times),
                          **({"zcoll_inter_bytes_per_step": counts[1].item() / len(times)}
                             if backend == "zcoll" else {}),
                          "settings": vars(args)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
