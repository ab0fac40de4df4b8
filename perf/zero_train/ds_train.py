#!/usr/bin/env python3
"""DeepSpeed ZeRO-3 on CPU (DS_ACCELERATOR=cpu) with a chosen torch.distributed backend.

Trains the byte-level LM of train_parity.py for a few steps with deepspeed.initialize (ZeRO
stage 3, fp32, AdamW) and prints the per-step losses as JSON on rank 0. Same seed, same data
order for every backend, so `--backend gloo` and `--backend zcoll` must print the same losses.

  DS_ACCELERATOR=cpu python3 perf/zero_train/ds_train.py --backend gloo --world 2 --steps 5
  DS_ACCELERATOR=cpu python3 perf/zero_train/ds_train.py --backend zcoll --zeropp --world 4 \
      --local 2 --steps 5     # DeepSpeed's ZeRO++ options on zcoll (qwZ, hpZ, qgZ)
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")
import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_parity import ByteLM, batch_at, load_corpus  # noqa: E402


def ds_config(args):
    zero = {"stage": 3, "stage3_param_persistence_threshold": 0,
            "stage3_prefetch_bucket_size": 0, "reduce_bucket_size": 1 << 20}
    if args.zeropp:  # qwZ + hpZ (one emulated node per secondary partition) + qgZ
        zero.update({"zero_quantized_weights": True, "zero_hpz_partition_size": args.local,
                     "zero_quantized_gradients": True})
    return {"train_micro_batch_size_per_gpu": args.batch, "gradient_accumulation_steps": 1,
            "optimizer": {"type": "AdamW", "params": {"lr": args.lr, "betas": [0.9, 0.95],
                                                      "weight_decay": 0.0,
                                                      "torch_adam": True}},
            "zero_optimization": zero, "steps_per_print": 1 << 30, "wall_clock_breakdown": False}


def worker(rank, args, queue):
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank % args.local),
                       "WORLD_SIZE": str(args.world), "LOCAL_SIZE": str(args.local),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(args.port),
                       "ZCOLL_HOSTID": f"node{rank // args.local}"})
    torch.set_num_threads(1)
    import deepspeed
    deepspeed.init_distributed(dist_backend=args.backend)
    zeropp_calls = None
    if args.zeropp:
        import zcoll.deepspeed  # DeepSpeed's ZeRO++ options on zcoll's qwZ / qgZ
        zeropp_calls = zcoll.deepspeed.enable().calls
    torch.manual_seed(args.seed)
    model = ByteLM(args.d, args.layers, args.heads, args.ctx)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=ds_config(args))
    train, _ = load_corpus(args.corpus_bytes)
    losses, step_s = [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = batch_at(train, step, rank, args.batch, args.ctx, args.seed)
        loss = F.cross_entropy(engine(x).reshape(-1, 256), y.reshape(-1))
        engine.backward(loss)
        engine.step()
        step_s.append(time.perf_counter() - t0)
        lt = loss.detach().clone()
        torch.distributed.all_reduce(lt)
        losses.append(lt.item() / args.world)
    if rank == 0:
        if args.timing:
            warm = sorted(step_s[2:] or step_s)
            queue.put({"losses": losses, "zeropp_calls": zeropp_calls,
                       "median_step_s": warm[len(warm) // 2]})
        else:
            queue.put({"losses": losses, "zeropp_calls": zeropp_calls} if args.zeropp else losses)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def run(args):
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    procs = mp.start_processes(worker, args=(args, q), nprocs=args.world, start_method="spawn",
                               join=False)
    losses = q.get()
    while not procs.join():
        pass
    return losses


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--local", type=int, default=1, help="ranks per emulated node")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=32)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--corpus-bytes", type=int, default=200_000)
    ap.add_argument("--port", type=int, default=29611)
    ap.add_argument("--timing", action="store_true",
                    help="print a JSON object with the losses and the median step time "
                         "(steps 3 onwards, rank 0)")
    ap.add_argument("--zeropp", action="store_true",
                    help="ZeRO++ options on, run on zcoll through zcoll.deepspeed.enable() "
                         "(needs --backend zcoll)")
    return ap


if __name__ == "__main__":
    print(json.dumps(run(parser().parse_args())))
