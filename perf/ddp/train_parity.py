"""Issue 39 training parity: DDP and HSDP with zcoll's quantized all-reduce vs the exact one.

A byte-level GPT (perf/fsdp2/train_parity.py's model and corpus: Vim's documentation, the last 5%
held out) trained on 4 CPU ranks as 2 emulated nodes (ZCOLL_HOSTID, as tools/zcollrun --nodes 2:
no rate limit, parity does not need one).

    python3 perf/ddp/train_parity.py --config exact|int8|int4ef|int4 [--steps 300] [--seed 0]
    python3 perf/ddp/train_parity.py --config int4|int4ef --block 4096 [--optim sgd] ...
    python3 perf/ddp/train_parity.py --config hsdp_exact|hsdp_int8|hsdp_int4ef ...
    python3 perf/ddp/parity_report.py          # the Markdown tables of results/*.json

DDP configs (DistributedDataParallel on the zcoll backend): exact (DDP's own all-reduce), int8
(zcoll.ddp.quantized_allreduce_hook, INT8 both hops and the gather, error feedback), int4ef
(INT4 inter-node hop and gather, INT8 intra-node, error feedback), int4 (the same without error
feedback: the negative control). Quantization starts at step 0 (start_iter=0). exact_gloo: DDP on
gloo, also exact: its sums round in another order, so it shows how far two exact runs of the same
seed drift apart (the noise floor of the comparison).
HSDP configs: fully_shard on the node's 2 ranks (mesh["shard"]), the replicate all-reduce across
the nodes through set_all_reduce_hook: hsdp_exact (dist.all_reduce AVG), hsdp_int8, hsdp_int4ef
(zcoll.fsdp.quantized_replicate_all_reduce); the replicate group's bytes sent to other nodes
(zcoll.get_stats) are recorded.
--block B sets the quantized configs' elements per scale (zcoll's default 256 without it; a
multiple of 32 in [32, 4096]): round-to-nearest with large blocks zeroes a block's small entries
every step, a bias that error feedback removes when the optimizer is linear in the gradients.
--optim sgd trains with SGD (momentum 0.9, lr 0.1) instead of AdamW (lr 2e-3); --lr overrides.
With SGD at block 4096 feedback brings INT4 back to the exact loss; with AdamW it does not
(perf/RESULTS.md section 10.2).
Each run writes results/<config>[_block<B>][_sgd][_lr<lr>][_steps<N>]_seed<seed>.json (only the
settings that differ from block 256, AdamW at its default lr, 300 steps): training loss per step (mean over ranks), the held-out loss, and whether every replica ends
with bit-identical parameters.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fsdp2"))
from train_parity import GPT, batch, corpus  # noqa: E402  (perf/fsdp2's model and data)

WORLD, LOCAL = 4, 2
DDP_QUANT = {"int8": dict(bits=8, intra_bits=8, error_feedback=True),
             "int4ef": dict(bits=4, intra_bits=8, error_feedback=True),
             "int4": dict(bits=4, intra_bits=8, error_feedback=False)}
HSDP_QUANT = {"hsdp_int8": DDP_QUANT["int8"], "hsdp_int4ef": DDP_QUANT["int4ef"]}
CONFIGS = ["exact", "exact_gloo", *DDP_QUANT, "hsdp_exact", *HSDP_QUANT]
DEFAULT_LR = {"adamw": 2e-3, "sgd": 0.1}


def quant_settings(args):
    """The config's quantization settings, with --block when given."""
    quant = dict(DDP_QUANT.get(args.config) or HSDP_QUANT[args.config])
    if args.block is not None:
        quant["block_size"] = args.block
    return quant


def wrap_ddp(model, args):
    from torch.nn.parallel import DistributedDataParallel
    import zcoll.ddp
    ddp = DistributedDataParallel(model)
    if args.config in DDP_QUANT:
        state = zcoll.ddp.QuantizedAllReduceState(start_iter=0, **quant_settings(args))
        ddp.register_comm_hook(state, zcoll.ddp.quantized_allreduce_hook)
    return ddp, None


def wrap_hsdp(model, args):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    import zcoll.fsdp
    mesh = init_device_mesh("cpu", (WORLD // LOCAL, LOCAL), mesh_dim_names=("replicate", "shard"))
    for b in model.blocks:
        fully_shard(b, mesh=mesh["shard"])
    fully_shard(model, mesh=mesh["shard"])
    group = mesh["replicate"].get_group()
    if args.config in HSDP_QUANT:
        zcoll.fsdp.quantized_replicate_all_reduce(model, group, **quant_settings(args))
    else:
        def exact(reduce_output):
            dist.all_reduce(reduce_output, op=dist.ReduceOp.AVG, group=group)
        for m in model.modules():
            if hasattr(m, "set_all_reduce_hook"):
                m.set_all_reduce_hook(exact)
    return model, group


def plain_copy(model, args):
    """The trained parameters as a plain GPT (FSDP's gathered exactly with full_tensor)."""
    if not args.config.startswith("hsdp"):
        return model.module
    trained = GPT(args.d, args.layers, args.heads, args.ctx)
    trained.load_state_dict({n: p.full_tensor() for n, p in model.named_parameters()},
                            strict=False)  # head.weight is tok.weight (tied)
    return trained


def replicas_identical(model):
    """True on every rank when every rank's parameters equal rank 0's bit for bit."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, 0)
    same = torch.tensor([1 if torch.equal(flat.view(torch.int32), ref.view(torch.int32)) else 0])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    return bool(same.item())


def make_optimizer(model, args):
    """AdamW (the default) or SGD with momentum 0.9, both without weight decay."""
    if args.optim == "sgd":
        return torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    return torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)


def worker(rank, path, args, out):
    torch.set_num_threads(1)
    os.environ["ZCOLL_HOSTID"] = f"node{rank // LOCAL}"
    import zcoll
    backend = "gloo" if args.config == "exact_gloo" else "zcoll"
    dist.init_process_group(backend, init_method=f"file://{path}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=300))
    train, held = corpus()
    torch.manual_seed(args.seed)
    model = GPT(args.d, args.layers, args.heads, args.ctx)
    wrap = wrap_hsdp if args.config.startswith("hsdp") else wrap_ddp
    model, rgroup = wrap(model, args)
    if rgroup is not None:
        zcoll.reset_stats(rgroup)
    opt = make_optimizer(model, args)
    gen = torch.Generator().manual_seed(1000 * args.seed + rank)
    losses = []
    t0 = time.perf_counter()
    for _ in range(args.steps):
        x, y = batch(train, gen, args.bsz, args.ctx)
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss = loss.detach()
        dist.all_reduce(loss)
        losses.append(loss.item() / WORLD)
    elapsed = time.perf_counter() - t0
    inter = None
    if rgroup is not None:  # bytes this rank's replicate all-reduces sent across nodes, per step
        inter = zcoll.get_stats(rgroup)["bytes_sent_inter"] / args.steps
    trained = plain_copy(model, args)
    same = replicas_identical(trained)
    held_loss = heldout(trained, held, rank, args)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"config": args.config, "seed": args.seed, "steps": args.steps,
                       "settings": vars(args), "torch": torch.__version__,
                       "params": sum(p.numel() for p in trained.parameters()),
                       "train_loss": losses,
                       "final_train_loss_avg10": sum(losses[-10:]) / len(losses[-10:]),
                       "heldout_loss": held_loss, "replicas_identical": same,
                       "replicate_inter_bytes_per_step_rank0": inter,
                       "seconds": elapsed}, f)
    dist.destroy_process_group()


@torch.no_grad()
def heldout(model, held, rank, args):
    """Mean cross-entropy over --eval-batches held-out batches per rank, averaged over ranks."""
    hgen = torch.Generator().manual_seed(999 + rank)
    total = torch.zeros(())
    for _ in range(args.eval_batches):
        x, y = batch(held, hgen, args.bsz, args.ctx)
        total += F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
    total /= args.eval_batches * WORLD
    dist.all_reduce(total)
    return total.item()


def result_name(args):
    """<config>[_block<B>][_sgd][_lr<lr>][_steps<N>]_seed<seed>.json: the settings that differ
    from the defaults of the first results (block 256, AdamW at its DEFAULT_LR, 300 steps) are in
    the name."""
    block = "" if args.block is None else f"_block{args.block}"
    optim = "" if args.optim == "adamw" else f"_{args.optim}"
    lr = "" if args.lr == DEFAULT_LR[args.optim] else f"_lr{args.lr:g}"
    steps = "" if args.steps == 300 else f"_steps{args.steps}"
    return f"{args.config}{block}{optim}{lr}{steps}_seed{args.seed}.json"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, choices=CONFIGS)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--bsz", type=int, default=8)
    p.add_argument("--optim", choices=sorted(DEFAULT_LR), default="adamw")
    p.add_argument("--lr", type=float, help="learning rate (default: the optimizer's in DEFAULT_LR)")
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--block", type=int,
                   help="elements per quantization block of the quantized configs (default 256)")
    p.add_argument("--out", help="JSON file (default perf/ddp/results/"
                                 "<config>[_block<B>][_steps<N>]_seed<seed>.json)")
    args = p.parse_args()
    if args.lr is None:
        args.lr = DEFAULT_LR[args.optim]
    if args.block is not None and args.config not in DDP_QUANT and args.config not in HSDP_QUANT:
        p.error(f"--block applies to the quantized configs, not {args.config}")
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                        result_name(args))
    os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("UCX_NET_DEVICES", "lo")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(worker, args=(os.path.join(d, "store"), args, args.out), nprocs=WORLD,
                           join=True, start_method="fork")
    r = json.load(open(args.out))
    print(json.dumps({k: r[k] for k in ("config", "seed", "final_train_loss_avg10",
                                        "heldout_loss", "replicas_identical",
                                        "replicate_inter_bytes_per_step_rank0", "seconds")}))


if __name__ == "__main__":
    main()
