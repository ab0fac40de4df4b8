"""torch's "nccl" backend on one GPU, two processes (the GPU kit's step 5, docs/GPU_KIT.md).

    LD_PRELOAD=build-gpu/nccl/libzcoll_nccl.so python3 tools/gpu_nccl_torch.py
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
      python3 tools/gpu_nccl_torch.py --nccl-hostid     # the same on torch's own NCCL

Both ranks use cuda:0. Checks, each against values computed exactly on the rank (inputs are small
integers, so every sum is exact in fp32 and bf16):
  all_reduce (sum, fp32 and bf16; avg fp32), all_gather_into_tensor, reduce_scatter_tensor (sum),
  then FSDP2 (fully_shard) on a small MLP for STEPS steps of SGD against the same model trained in
  one process on the whole batch: parameters within 1e-5 (fp32; reduction order differs).
Prints one line per check, "PASS name" / "FAIL name: why", then which libnccl file the process
mapped and the runtime NCCL version torch sees; exit 0 when every check passed.
Options:
  --nccl-hostid  each rank sets NCCL_HOSTID to a value of its own before init: NCCL refuses two
                 ranks on one GPU of one host ("Duplicate GPU detected"), not on two "hosts"
                 (it then connects them through its network transport; the kit also sets
                 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo)
  --save PATH    rank 0 saves FSDP2's final parameters there (torch.save), for comparing two runs
  --cpu-gloo     the same checks on the CPU over gloo (to check this script without a GPU)
"""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STEPS = 5
WORLD = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(results, name, ok, why=""):
    results.append(f"{'PASS' if ok else 'FAIL'} {name}{'' if ok else ': ' + why}")


def collectives(rank, dev, results):
    n = 1 << 20
    base = torch.arange(n, device=dev, dtype=torch.float32) % 97
    for dtype in (torch.float32, torch.bfloat16):
        t = (base + rank).to(dtype)
        dist.all_reduce(t)
        want = (2 * base + 1).to(dtype)
        check(results, f"all_reduce sum {dtype}", torch.equal(t, want),
              f"{(t != want).sum().item()} of {n} differ")
    t = base + 2 * rank
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    want = base + 1
    check(results, "all_reduce avg float32", torch.equal(t, want), f"{(t != want).sum().item()} differ")

    shard = torch.full((n,), float(rank + 1), device=dev)
    gathered = torch.empty(WORLD * n, device=dev)
    dist.all_gather_into_tensor(gathered, shard)
    want = torch.cat([torch.full((n,), float(r + 1), device=dev) for r in range(WORLD)])
    check(results, "all_gather_into_tensor", torch.equal(gathered, want), "wrong blocks")

    full = torch.arange(WORLD * n, device=dev, dtype=torch.float32) % 89 + rank
    out = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(out, full)
    whole = sum(torch.arange(WORLD * n, device=dev, dtype=torch.float32) % 89 + r for r in range(WORLD))
    want = whole[rank * n:(rank + 1) * n]
    check(results, "reduce_scatter_tensor sum", torch.equal(out, want), f"{(out != want).sum().item()} differ")


def model(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 64)).to(dev)


def fsdp2(rank, dev, results, save):
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(1)
    batches = [torch.randn(WORLD * 8, 64, device=dev) for _ in range(STEPS)]

    reference = model(dev)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for x in batches:
        ref_opt.zero_grad()
        reference(x).square().mean().backward()
        ref_opt.step()

    sharded = model(dev)
    for layer in sharded:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(sharded)
    opt = torch.optim.SGD(sharded.parameters(), lr=0.1)
    for x in batches:
        opt.zero_grad()
        sharded(x[rank * 8:(rank + 1) * 8]).square().mean().backward()
        opt.step()
    worst = 0.0
    final = []
    for p, q in zip(sharded.parameters(), reference.parameters()):
        full = p.full_tensor()
        final.append(full.detach().cpu())
        worst = max(worst, (full - q).abs().max().item())
    if save and rank == 0:
        torch.save(final, save)
    check(results, f"FSDP2 {STEPS} steps vs one process", worst <= 1e-5, f"max difference {worst:g}")


def nccl_in_use():
    with open("/proc/self/maps") as f:
        files = sorted({l.split()[-1] for l in f if "nccl" in l.split()[-1]})
    pg = getattr(torch._C._distributed_c10d, "ProcessGroupNCCL", None)
    version = pg.get_runtime_nccl_version() if pg is not None else None
    return f"mapped {files}; runtime NCCL {version}"


def worker(rank, port, queue, opts):
    results = []
    cpu_gloo = opts.cpu_gloo
    if opts.nccl_hostid:
        os.environ["NCCL_HOSTID"] = f"zcoll-gpu-kit-rank{rank}"
    try:
        init = dict(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
        if cpu_gloo:
            dev = torch.device("cpu")
            dist.init_process_group("gloo", **init)
        else:
            dev = torch.device("cuda", 0)
            torch.cuda.set_device(dev)
            dist.init_process_group("nccl", device_id=dev, **init)
        collectives(rank, dev, results)
        fsdp2(rank, dev, results, opts.save)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as e:  # the failure is the result (NCCL's duplicate-GPU refusal included)
        results.append(f"FAIL rank {rank}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
    results.append(f"INFO rank {rank}: {nccl_in_use()}")
    queue.put((rank, results))


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-gloo", action="store_true")
    parser.add_argument("--nccl-hostid", action="store_true")
    parser.add_argument("--save")
    opts = parser.parse_args()
    if not opts.cpu_gloo and not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 3
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, port, queue, opts)) for r in range(WORLD)]
    for p in procs:
        p.start()
    lines = []
    for _ in procs:
        try:
            _, results = queue.get(timeout=240)
        except Exception:
            lines.append("FAIL a rank sent no result in 240 s")
            break
        lines += results
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
            lines.append(f"FAIL rank process {p.pid} did not exit")
    for line in sorted(set(lines), key=lines.index):
        print(line)
    return 1 if any(l.startswith("FAIL") for l in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
