#!/usr/bin/env python3
"""DeepSpeed ZeRO stage 1 and 2 on CPU over zcoll, with and without DeepSpeed's ZeRO++ options
(zero_quantized_weights, zero_quantized_gradients) run by zcoll.deepspeed.enable().

One launch of --world ranks (--local per emulated node, ZCOLL_HOSTID per node) trains the
byte-level LM of train_parity.py with deepspeed.initialize several times in a row, same seed and
data each time: per stage, first with DeepSpeed untouched ("plain", before enable()), then after
enable() with the options off ("off") and on ("on", and the VARIANTS below); then it checks
that enable() refuses two configurations it does not support. Per run, rank 0 reports the
losses, whether every rank held bit-identical parameters after each step, whether each rank's
own partition of them equals its fp32 master partition (the optimizer's exact output), the
inter-node bytes sent during backward() (the gradient reduction) and during step() (the weight
all-gather), summed over the ranks, zcoll.deepspeed's call counters and the error-feedback
residuals kept. Prints one JSON object (the last line of stdout).

  DS_ACCELERATOR=cpu python3 perf/zero_train/ds_zero12.py --world 4 --local 2 --steps 4
"""
import argparse
import json
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_parity import ByteLM, batch_at, load_corpus  # noqa: E402

# Configurations enable() must refuse at ZeRO stage 1/2, with a word of the message.
REFUSED = [({"zero_quantized_gradients": True, "use_multi_rank_bucket_allreduce": False},
            "use_multi_rank_bucket_allreduce"),
           ({"zero_quantized_weights": True, "zero_hpz_partition_size": 2},
            "zero_hpz_partition_size")]


# More ZeRO++ runs per stage, through DeepSpeed's other paths: stage 1 without reduce_scatter
# (gradient_reduction_w_predivide) and with offload_optimizer (DeepSpeed's cpu_offload paths),
# stage 2 with overlap_comm and without contiguous_gradients (buffered_reduce_fallback) and
# with bf16 weights (the gather in bf16), and both with enable(allreduce_error_feedback=True).
VARIANTS = {1: {"no_reduce_scatter": {"reduce_scatter": False},
                "offload": {"offload_optimizer": {"device": "cpu"}},
                "error_feedback": {"error_feedback": True}},
            2: {"overlap_noncontiguous": {"overlap_comm": True, "contiguous_gradients": False},
                "bf16": {"bf16": True}, "error_feedback": {"error_feedback": True}}}


def ds_config(args, stage, zero_extra):
    zero = {"stage": stage, "reduce_bucket_size": args.bucket, "contiguous_gradients": True}
    zero.update(zero_extra)
    bf16 = zero.pop("bf16", False)
    return {"bf16": {"enabled": bf16}, "train_micro_batch_size_per_gpu": args.batch,
            "gradient_accumulation_steps": args.gas,
            "optimizer": {"type": "AdamW", "params": {"lr": args.lr, "betas": [0.9, 0.95],
                                                      "weight_decay": 0.0,
                                                      "torch_adam": True}},
            "zero_optimization": zero, "steps_per_print": 1 << 30, "wall_clock_breakdown": False}


def _groups(engine):
    opt = engine.optimizer
    return list({id(g): g for g in list(opt.real_dp_process_group) + [opt.dp_process_group]
                 }.values())


def _inter_bytes(groups):
    import zcoll
    total = torch.tensor([sum(zcoll.get_stats(g)["bytes_sent_inter"] for g in groups)],
                         dtype=torch.float64)
    dist.all_reduce(total)
    return int(total.item())


def _reset(groups):
    import zcoll
    for g in groups:
        zcoll.reset_stats(g)


def _identical_everywhere(model):
    """Whether every rank holds the same parameter bits as rank 0."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).view(torch.int32)
    ref = flat.clone()
    dist.broadcast(ref, 0)
    same = torch.tensor([int(torch.equal(flat, ref))])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    return bool(same.item())


def _owner_holds_master(opt):
    """Whether every rank's own partition of the model weights equals (in value) its fp32 master
    partition, the optimizer's output (true in exact fp32 training; under qwZ the owner holds
    the dequantized codes instead)."""
    rank = dist.get_rank(opt.real_dp_process_group[0])
    own = opt.parallel_partitioned_bit16_groups[0][rank].float()
    same = torch.tensor([int(torch.equal(own, opt.single_partition_of_fp32_groups[0]))])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    return bool(same.item())


def train(args, stage, zero_extra, corpus, rank):
    import deepspeed
    torch.manual_seed(args.seed)
    model = ByteLM(args.d, args.layers, args.heads, args.ctx)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=ds_config(args, stage, zero_extra))
    groups = _groups(engine)
    out = {"losses": [], "identical": [], "owner_exact": [], "grad_inter_bytes": 0,
           "step_inter_bytes": 0}
    for step in range(args.steps):
        x, y = batch_at(corpus, step, rank, args.batch, args.ctx, args.seed)
        loss = F.cross_entropy(engine(x).reshape(-1, 256), y.reshape(-1))
        _reset(groups)
        engine.backward(loss)
        out["grad_inter_bytes"] += _inter_bytes(groups)
        _reset(groups)
        engine.step()
        out["step_inter_bytes"] += _inter_bytes(groups)
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        out["losses"].append(lt.item() / args.world)
        out["identical"].append(_identical_everywhere(model))
        out["owner_exact"].append(_owner_holds_master(engine.optimizer))
    out["params"] = sum(p.numel() for p in model.parameters())
    state = getattr(engine.optimizer, "zcoll_quantization", None)
    if state is not None:  # error feedback: the residuals kept, and whether they were written
        buffers = [buffer for _, buffer in state.residuals]
        out["residual_bytes"] = sum(b.numel() * b.element_size() for b in buffers)
        out["residual_written"] = bool(buffers) and all(bool(b.any()) for b in buffers)
        out["residuals_made"] = state.residuals_made
    engine.destroy()
    return out


def refused(args, stage, zero_extra, word):
    """The message of enable()'s refusal of this configuration ("" if it was not refused)."""
    import deepspeed
    torch.manual_seed(args.seed)
    model = ByteLM(args.d, args.layers, args.heads, args.ctx)
    try:
        deepspeed.initialize(model=model, model_parameters=model.parameters(),
                             config=ds_config(args, stage, zero_extra))
    except ValueError as err:
        return str(err) if word in str(err) else f"(other error) {err}"
    return ""


def worker(rank, args, queue):
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank % args.local),
                       "WORLD_SIZE": str(args.world), "LOCAL_SIZE": str(args.local),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(args.port),
                       "ZCOLL_HOSTID": f"node{rank // args.local}"})
    torch.set_num_threads(1)
    import deepspeed
    deepspeed.init_distributed(dist_backend="zcoll")
    corpus, _ = load_corpus(args.corpus_bytes)
    stages = [int(s) for s in args.stages.split(",")]
    result = {}
    for stage in stages:
        result[f"plain{stage}"] = train(args, stage, {}, corpus, rank)
    import zcoll.deepspeed
    settings = zcoll.deepspeed.enable()
    options = {"zero_quantized_weights": True, "zero_quantized_gradients": True}
    for stage in stages:
        result[f"off{stage}"] = train(args, stage, {}, corpus, rank)
        before = dict(settings.calls)
        result[f"on{stage}"] = train(args, stage, options, corpus, rank)
        result[f"on{stage}"]["calls"] = {k: settings.calls[k] - before[k] for k in before}
        for name, extra in VARIANTS.get(stage, {}).items() if args.variants else ():
            extra = dict(extra)
            feedback = extra.pop("error_feedback", False)
            zcoll.deepspeed.enable(allreduce_error_feedback=feedback)
            before = dict(settings.calls)
            result[f"on{stage}_{name}"] = train(args, stage, {**options, **extra}, corpus, rank)
            result[f"on{stage}_{name}"]["calls"] = {k: settings.calls[k] - before[k]
                                                    for k in before}
            zcoll.deepspeed.enable()
    result["refused"] = [refused(args, stages[-1], extra, word) for extra, word in REFUSED]
    if rank == 0:
        queue.put(result)
    dist.barrier()
    dist.destroy_process_group()


def run(args):
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    procs = mp.start_processes(worker, args=(args, q), nprocs=args.world, start_method="spawn",
                               join=False)
    result = q.get()
    while not procs.join():
        pass
    return result


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--local", type=int, default=2, help="ranks per emulated node")
    ap.add_argument("--stages", default="1,2", help="ZeRO stages to run, comma-separated")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--gas", type=int, default=1,
                    help="gradient_accumulation_steps (each step below is one micro-step)")
    ap.add_argument("--ctx", type=int, default=32)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--bucket", type=int, default=1 << 22, help="reduce_bucket_size (elements)")
    ap.add_argument("--corpus-bytes", type=int, default=200_000)
    ap.add_argument("--port", type=int, default=29711)
    ap.add_argument("--no-variants", dest="variants", action="store_false",
                    help="skip the runs through DeepSpeed's other gradient paths (VARIANTS)")
    return ap


if __name__ == "__main__":
    print(json.dumps(run(parser().parse_args())))
