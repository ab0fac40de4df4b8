#!/usr/bin/env python3
"""What error feedback does to one repeated input, per block size (issue 39, perf/RESULTS.md 10.2):

    python3 perf/ddp/ef_probe.py > perf/ddp/results/ef_probe.md

4 CPU ranks as 2 emulated nodes (as train_parity.py), each with its own 256K float32 values:
Gaussian whose scale changes by exp(2 N(0,1)) every 512 elements (gradients of parameters of
very different sizes side by side). zcoll.zeropp.quantized_all_reduce (AVG) at INT4 inter-node and
gather, INT8 intra-node (train_parity.py's int4 configs), round-to-nearest, for each block size:
one call's relative L2 error against the exact mean, the share of nonzero exact values that come
out 0 (a block's small entries rounded away), and the relative L2 error of the mean of K calls on
the same input with and without error feedback. Without feedback every call rounds the same way,
so the mean keeps one call's error (the bias); with it the error shrinks about as 1/K
(docs/ZEROPP.md, "Error feedback").
"""
import os
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD, LOCAL, N, K = 4, 2, 1 << 18, 64
BLOCKS = (256, 1024, 4096)


def rel_err(y, exact):
    return ((y - exact).norm() / exact.norm()).item()


def mean_of_calls(x, exact, quant, residual):
    import zcoll.zeropp as zp
    acc = torch.zeros_like(x)
    for _ in range(K):
        y = x.clone()
        zp.quantized_all_reduce(y, None, dist.ReduceOp.AVG, residual=residual, **quant)
        acc += y
    return rel_err(acc / K, exact)


def worker(rank, path):
    torch.set_num_threads(1)
    os.environ["ZCOLL_HOSTID"] = f"node{rank // LOCAL}"
    import zcoll.zeropp as zp
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=120))
    scale = torch.exp(2 * torch.randn(N // 512, generator=torch.Generator().manual_seed(3)))
    x = torch.randn(N, generator=torch.Generator().manual_seed(7 + rank))
    x *= scale.repeat_interleave(512)
    exact = x.clone()
    dist.all_reduce(exact)
    exact /= WORLD
    if rank == 0:
        print(f"| block | one call: rel L2 error | zeroed | mean of {K} calls, no feedback | "
              f"mean of {K} calls, error feedback |\n|---|---|---|---|---|")
    for block in BLOCKS:
        quant = dict(bits=4, intra_bits=8, block_size=block)
        y = x.clone()
        zp.quantized_all_reduce(y, None, dist.ReduceOp.AVG, **quant)
        zeroed = ((y == 0) & (exact != 0)).float().mean().item()
        plain = mean_of_calls(x, exact, quant, None)
        fed = mean_of_calls(x, exact, quant,
                            zp.new_residual(x, None, dtype=torch.float32, **quant))
        if rank == 0:
            print(f"| {block} | {rel_err(y, exact):.4f} | {zeroed:.3f} | {plain:.4f} | "
                  f"{fed:.5f} |", flush=True)
    dist.destroy_process_group()


def main():
    os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(worker, args=(os.path.join(d, "store"),), nprocs=WORLD, join=True,
                           start_method="fork")


if __name__ == "__main__":
    main()
