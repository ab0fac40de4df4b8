#!/usr/bin/env python3
"""Time one DDP training step per rank process, and count its inter-node bytes (issue 39).

One process per rank under tools/emulate_cluster.sh (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, ZCOLL_COMM_ID); torch's store listens on ZCOLL_COMM_ID's host at its port + 1,
gloo is pinned to GLOO_SOCKET_IFNAME (zc0 under emulate_cluster: the rate-limited link). The model
is perf/fsdp2's GPT at perf/fsdp2/step_time.py's sizes (d 512, 4 layers, batch 2 x 32 tokens:
12.8M parameters, 51 MB of float32 gradients per step), so the gradients, not the compute, are
what a slow link makes expensive.

  --config floor   DDP on gloo with a comm hook that returns the local gradients (no
                   communication; DDP's bucketing and copies kept)
  --config gloo    DDP on gloo (its all-reduce)
  --config zcoll   DDP on zcoll, its exact all-reduce
  --config int8    DDP on zcoll + zcoll.ddp.quantized_allreduce_hook, INT8 both hops and gather
  --config int4ef  the hook with INT4 inter-node hop and gather, INT8 intra-node
Error feedback on, quantized from the first step (start_iter=0). Each step is bracketed by
barriers; rank 0 prints one JSON line: median and mean step time over --steps (after --warmup),
rank 0's CPU seconds per step, the bytes the nodes' zc0 interfaces transmitted per step, and for
zcoll configs zcoll's own inter-node payload (zcoll.get_stats, summed over ranks).
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
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fsdp2"))
from train_parity import GPT  # noqa: E402
from step_time import veth_tx_bytes  # noqa: E402

QUANT = {"int8": dict(bits=8, intra_bits=8), "int4ef": dict(bits=4, intra_bits=8)}


def local_hook(_state, bucket):
    """No communication: the bucket's local gradients, as DDP's all-reduce would return them."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def wrap(model, config):
    from torch.nn.parallel import DistributedDataParallel
    ddp = DistributedDataParallel(model)
    if config == "floor":
        ddp.register_comm_hook(None, local_hook)
    elif config in QUANT:
        import zcoll.ddp
        state = zcoll.ddp.QuantizedAllReduceState(start_iter=0, error_feedback=True,
                                                  **QUANT[config])
        ddp.register_comm_hook(state, zcoll.ddp.quantized_allreduce_hook)
    return ddp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=["floor", "gloo", "zcoll", *QUANT], required=True)
    for name, default in (("steps", 6), ("warmup", 2), ("batch", 2), ("ctx", 32), ("d", 512),
                          ("layers", 4), ("heads", 8)):
        ap.add_argument(f"--{name}", type=int, default=default)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    host, port = os.environ["ZCOLL_COMM_ID"].rsplit(":", 1)
    torch.set_num_threads(1)
    backend = "gloo" if args.config in ("floor", "gloo") else "zcoll"
    if backend == "zcoll":
        import zcoll  # noqa: F401
    store = dist.TCPStore(host, int(port) + 1, world, is_master=rank == 0,
                          timeout=timedelta(seconds=120))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    torch.manual_seed(1)
    model = GPT(args.d, args.layers, args.heads, args.ctx)
    params = sum(p.numel() for p in model.parameters())
    model = wrap(model, args.config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    times, cpu = [], []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if backend == "zcoll":
                import zcoll
                zcoll_before = zcoll.get_stats()["bytes_sent_inter"]
            dist.barrier()
            veth_before = veth_tx_bytes()
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
    inter = zcoll.get_stats()["bytes_sent_inter"] - zcoll_before if backend == "zcoll" else 0
    counts = torch.tensor([veth_tx_bytes() - veth_before if local_rank == 0 else 0, inter],
                          dtype=torch.float64)
    dist.all_reduce(counts)
    if rank == 0:
        print(json.dumps({"label": args.config, "config": args.config, "backend": backend,
                          "params": params, "world": world,
                          "median_s": statistics.median(times), "mean_s": statistics.mean(times),
                          "cpu_s": statistics.median(cpu), "steps": len(times),
                          "veth_bytes_per_step": counts[0].item() / len(times),
                          **({"zcoll_inter_bytes_per_step": counts[1].item() / len(times)}
                             if backend == "zcoll" else {}),
                          "settings": vars(args)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
