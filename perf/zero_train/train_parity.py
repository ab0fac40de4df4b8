#!/usr/bin/env python3
"""ZeRO-3 vs ZeRO++ training parity on a small byte-level transformer LM.

Data: Python's own standard-library source text (sysconfig stdlib directory), read from disk:
files sorted by name, every 10th file held out for evaluation. Model: a few-layer pre-LN
transformer over bytes (vocab 256).

Data-parallel ZeRO-3 over W ranks on N emulated nodes of L ranks each (rank r is on node r // L):
  * all parameters live in one flat fp32 vector, padded to a multiple of W * block; rank r owns
    shard r (C elements) and runs Adam on that shard only (sharded optimizer state);
  * forward: all-gather the full flat vector from the shards, compute the loss;
  * backward: all-gather the weights again (as ZeRO-3 does after releasing them) and
    recompute the forward with autograd on the re-gathered weights, then backward;
  * gradients: reduce-scatter (average) of the flat gradient; each rank gets its shard.

Variants (same seed, same data order, same initial weights):
  zero3     standard collectives: all_gather_into_tensor / reduce_scatter_tensor (op AVG).
  zeropp    qwZ (INT8 block-quantized forward all-gather), hpZ (backward gather from the
            per-node secondary shard, zero inter-node bytes), qgZ (INT4 two-hop reduce-scatter:
            intra-node hop, re-quantize, inter-node hop).
  zeropp_ef the same with error feedback on qgZ's first quantization (residual carried by the
            caller across steps).

--impl torch: the ZeRO++ collectives are computed with the same numerics as zcoll's
(docs/ZEROPP.md: symmetric block quantization, round-to-nearest-even, scale = absmax/qmax, the
same two-hop order) from gloo collectives; this checks the training claim independently of the
transport. --impl zcoll --backend zcoll: ZeRO-3 on zcoll's standard collectives and ZeRO++ on
zcoll's own qwZ/hpZ/qgZ (zcoll.zeropp), the product itself. Writes <out>/parity_<tag>.json, .md
and .png.
"""
import argparse
import glob
import json
import math
import os
import sys
import sysconfig
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


# ------------------------------------------------------------------------------------------
# Data: the interpreter's own stdlib source, as bytes.
# ------------------------------------------------------------------------------------------
def load_corpus(max_bytes):
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    train, held = bytearray(), bytearray()
    for i, path in enumerate(files):
        with open(path, "rb") as f:
            data = f.read()
        (held if i % 10 == 9 else train).extend(data)
        if len(train) >= max_bytes and len(held) >= max_bytes // 10:
            break
    return (torch.tensor(list(train[:max_bytes]), dtype=torch.long),
            torch.tensor(list(held[:max_bytes // 10]), dtype=torch.long))


def batch_at(data, step, rank, batch, ctx, seed):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 101 + rank)
    starts = torch.randint(0, data.numel() - ctx - 1, (batch,), generator=g)
    x = torch.stack([data[s:s + ctx] for s in starts.tolist()])
    y = torch.stack([data[s + 1:s + ctx + 1] for s in starts.tolist()])
    return x, y


# ------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ByteLM(nn.Module):
    def __init__(self, d, layers, heads, ctx):
        super().__init__()
        self.tok, self.pos = nn.Embedding(256, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, 256)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.ln(h))


# ------------------------------------------------------------------------------------------
# Quantization with zcoll's numerics (symmetric block, round to nearest even)
# ------------------------------------------------------------------------------------------
def quant_dequant(x, bits, block):
    """dequant(quant(x)) per block of `block` elements; x.numel() % block == 0."""
    qmax = float(2 ** (bits - 1) - 1)
    xb = x.view(-1, block)
    scale = xb.abs().amax(dim=1, keepdim=True) / qmax
    # Divide (not multiply by 1/scale): a subnormal scale has an infinite reciprocal, and
    # 0 * inf would turn a block of tiny error-feedback residuals into NaN.
    q = torch.clamp(torch.round(xb / torch.where(scale > 0, scale, torch.ones_like(scale))),
                    -qmax, qmax)  # torch.round: half to even
    return (q * scale).view_as(x)


# ------------------------------------------------------------------------------------------
# Collectives (torch implementation over any torch.distributed backend)
# ------------------------------------------------------------------------------------------
class Comms:
    def __init__(self, world, local, args):
        self.world, self.local = world, local
        self.nodes = world // local
        self.rank = dist.get_rank()
        self.node, self.lidx = divmod(self.rank, local)
        self.block, self.args = args.block, args
        # new_group must be called by every rank for every group, in the same order.
        self.node_group = self.cross_group = None
        for n in range(self.nodes):
            g = dist.new_group(list(range(n * local, (n + 1) * local)))
            if n == self.node:
                self.node_group = g
        for j in range(local):
            g = dist.new_group(list(range(j, world, local)))
            if j == self.lidx:
                self.cross_group = g
        self.secondary = None
        self.residual = None

    # ZeRO-3 standard collectives
    def all_gather(self, shard):
        out = torch.empty(shard.numel() * self.world)
        dist.all_gather_into_tensor(out, shard)
        return out

    def reduce_scatter_avg(self, full):
        out = torch.empty(full.numel() // self.world)
        dist.reduce_scatter_tensor(out, full, op=dist.ReduceOp.SUM)
        return out.div_(self.world)

    # qwZ + hpZ: forward gather keeps the node's secondary shard (dequantized INT8 shards of
    # the ranks sharing this local index), backward gathers it inside the node only.
    def qwz_hpz_gather(self, shard):
        c = shard.numel()
        mine = quant_dequant(shard, self.args.qwz_bits, self.block)
        sec = torch.empty(c * self.nodes)
        dist.all_gather_into_tensor(sec, mine, group=self.cross_group)  # inter-node stage
        self.secondary = sec
        return self.gather_from_secondary()

    def gather_from_secondary(self):
        c = self.secondary.numel() // self.nodes
        per_local = torch.empty(self.secondary.numel() * self.local)
        dist.all_gather_into_tensor(per_local, self.secondary, group=self.node_group)
        # per_local[j][m] is the shard of rank m * L + j; reorder to global rank order.
        return per_local.view(self.local, self.nodes, c).transpose(0, 1).reshape(-1)

    # qgZ: INT4 quantize, intra-node sum, re-quantize, inter-node sum, average.
    def qgz_reduce_scatter_avg(self, full, error_feedback):
        if error_feedback:
            if self.residual is None:
                self.residual = torch.zeros_like(full)
            full = full + self.residual
        q1 = quant_dequant(full, self.args.qgz_bits, self.block)
        if error_feedback:
            self.residual = full - q1
        dist.all_reduce(q1, group=self.node_group)            # intra-node hop (sum over L)
        q2 = quant_dequant(q1, self.args.qgz_bits, self.block)  # re-quantize for inter hop
        dist.all_reduce(q2, group=self.cross_group)           # inter-node hop (sum over N)
        c = full.numel() // self.world
        return q2[self.rank * c:(self.rank + 1) * c].div_(self.world)


class ZcollComms(Comms):
    """The same steps on zcoll's own ZeRO++ collectives (zcoll.zeropp, --impl zcoll, backend
    zcoll): qwZ + hpZ in one zcollAllGatherHier that keeps the secondary shard, the backward
    gather from it, qgZ as zcollQuantizedReduceScatter (Avg); ZeRO-3 as above on zcoll's
    standard collectives."""

    def __init__(self, world, local, args):
        super().__init__(world, local, args)
        import zcoll.zeropp
        self.zpp = zcoll.zeropp

    def qwz_hpz_gather(self, shard):
        out = torch.empty(shard.numel() * self.world)
        numel = self.zpp.secondary_shard_numel(shard.numel())
        if getattr(self, "secondary", None) is None or self.secondary.numel() != numel:
            self.secondary = torch.empty(numel)  # kept across steps, as DeepSpeed keeps its own
        self.zpp.all_gather_hier(out, shard, self.secondary, bits=self.args.qwz_bits,
                                 block_size=self.block)
        return out

    def gather_from_secondary(self):
        out = torch.empty(self.secondary.numel() // self.nodes * self.world)
        self.zpp.all_gather_from_secondary(out, self.secondary)
        return out

    def qgz_reduce_scatter_avg(self, full, error_feedback):
        if error_feedback:
            raise ValueError("--impl zcoll: error feedback is not part of zcoll's qgZ")
        out = torch.empty(full.numel() // self.world)
        self.zpp.quantized_reduce_scatter(out, full, dist.ReduceOp.AVG, bits=self.args.qgz_bits,
                                          intra_bits=self.args.qgz_bits, block_size=self.block)
        return out


# ------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------
def flat_layout(model, world, block):
    shapes = [(n, p.shape, p.numel()) for n, p in model.named_parameters()]
    total = sum(s[2] for s in shapes)
    unit = world * block
    padded = (total + unit - 1) // unit * unit
    return shapes, total, padded


def unflatten(flat, shapes):
    # One split (not a slice per parameter): the backward of a split is one concatenation,
    # where each slice's backward would build a zero-filled gradient the size of `flat`.
    sizes = [n for _, _, n in shapes]
    pieces = flat.split(sizes + [flat.numel() - sum(sizes)])
    return {name: piece.view(shape) for (name, shape, _), piece in zip(shapes, pieces)}


def evaluate(model, shapes, full, held, args):
    params = unflatten(full, shapes)
    g = torch.Generator().manual_seed(12345)
    starts = torch.randint(0, held.numel() - args.ctx - 1, (args.eval_batches * args.batch,),
                           generator=g).tolist()
    tot = 0.0
    with torch.no_grad():
        for i in range(args.eval_batches):
            s = starts[i * args.batch:(i + 1) * args.batch]
            x = torch.stack([held[a:a + args.ctx] for a in s])
            y = torch.stack([held[a + 1:a + args.ctx + 1] for a in s])
            logits = torch.func.functional_call(model, params, (x,))
            tot += F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1)).item()
    return tot / args.eval_batches


def worker(rank, args, queue):
    os.environ["ZCOLL_HOSTID"] = f"node{rank // args.local}"
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, init_method=f"file://{args.store}",
                            rank=rank, world_size=args.world)
    comms = (ZcollComms if args.impl == "zcoll" else Comms)(args.world, args.local, args)
    train, held = load_corpus(args.corpus_bytes)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for variant in args.variants.split(","):
            comms.residual = comms.secondary = None
            r = train_one(rank, args, variant, seed, comms, train, held)
            if rank == 0:
                queue.put(r)
    dist.destroy_process_group()


def zero_step(comms, model, shapes, shard, x, y, variant):
    """One ZeRO-3 / ZeRO++ step's communication and compute: sets shard.grad to this rank's
    averaged gradient shard and returns the (local) loss. The optimizer step is the caller's."""
    zpp = variant.startswith("zeropp")
    # forward: gather, loss
    full = comms.qwz_hpz_gather(shard) if zpp else comms.all_gather(shard)
    with torch.no_grad():
        logits = torch.func.functional_call(model, unflatten(full, shapes), (x,))
        loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
    del full, logits
    # backward: gather again (hpZ: from the node's secondary shard), recompute, backward
    full = (comms.gather_from_secondary() if zpp else comms.all_gather(shard))
    full.requires_grad_(True)
    logits = torch.func.functional_call(model, unflatten(full, shapes), (x,))
    F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1)).backward()
    grad = full.grad
    if zpp:
        shard.grad = comms.qgz_reduce_scatter_avg(grad, error_feedback=variant == "zeropp_ef")
    else:
        shard.grad = comms.reduce_scatter_avg(grad)
    return loss


def train_one(rank, args, variant, seed, comms, train, held):
    torch.manual_seed(seed)
    model = ByteLM(args.d, args.layers, args.heads, args.ctx)
    shapes, total, padded = flat_layout(model, args.world, args.block)
    init = torch.zeros(padded)
    init[:total] = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    c = padded // args.world
    shard = init[rank * c:(rank + 1) * c].clone()
    opt = torch.optim.AdamW([shard], lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    for p in model.parameters():
        p.requires_grad_(False)
    losses, t0 = [], time.time()
    for step in range(args.steps):
        x, y = batch_at(train, step, rank, args.batch, args.ctx, seed)
        loss = zero_step(comms, model, shapes, shard, x, y, variant)
        for group in opt.param_groups:  # cosine decay
            group["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        losses.append(lt.item() / args.world)
    full = comms.all_gather(shard)  # exact final weights for evaluation
    held_loss = evaluate(model, shapes, full, held, args)
    return {"variant": variant, "seed": seed, "losses": losses, "held": held_loss,
            "seconds": time.time() - t0, "params": total}


def smooth_tail(losses, n):
    tail = losses[-n:]
    return sum(tail) / len(tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", choices=["torch", "zcoll"], default="torch",
                    help="torch: ZeRO++ emulated with torch ops over --backend; zcoll: zcoll's "
                         "qwZ/hpZ/qgZ (needs --backend zcoll)")
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--local", type=int, default=2, help="ranks per emulated node")
    ap.add_argument("--variants", default="zero3,zeropp,zeropp_ef")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--qwz-bits", type=int, default=8)
    ap.add_argument("--qgz-bits", type=int, default=4)
    ap.add_argument("--corpus-bytes", type=int, default=4_000_000)
    ap.add_argument("--eval-batches", type=int, default=40)
    ap.add_argument("--tail", type=int, default=20, help="final loss = mean of the last N steps")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "results"))
    ap.add_argument("--tag", default="torch_gloo")
    args = ap.parse_args()
    assert args.world % args.local == 0
    args.store = f"/tmp/zcoll_parity_store_{os.getpid()}"
    ctx = mp.get_context("spawn")
    results = []
    q = ctx.SimpleQueue()
    procs = mp.start_processes(worker, args=(args, q), nprocs=args.world, start_method="spawn",
                               join=False)
    runs = len(args.seeds.split(",")) * len(args.variants.split(","))
    for _ in range(runs):
        r = q.get()
        results.append(r)
        print(f"seed {r['seed']} {r['variant']:10s} first {r['losses'][0]:.4f} "
              f"final {smooth_tail(r['losses'], args.tail):.4f} held {r['held']:.4f} "
              f"({r['seconds']:.0f} s)", flush=True)
    while not procs.join():
        pass
    if os.path.exists(args.store):
        os.remove(args.store)
    write_outputs(args, results)


def write_outputs(args, results):
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"parity_{args.tag}")
    with open(base + ".json", "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items() if k != "store"},
                   "results": results}, f)
    ref = {r["seed"]: r for r in results if r["variant"] == "zero3"}
    lines = [f"Byte-level LM, {results[0]['params']} parameters, {args.layers} layers, d={args.d}, "
             f"{args.world} ranks on {args.world // args.local} emulated nodes, {args.steps} steps, "
             f"batch {args.batch}x{args.ctx} bytes per rank; final = mean train loss of the last "
             f"{args.tail} steps; held-out = {args.eval_batches} batches of unseen stdlib files.",
             "",
             "| seed | variant | first loss | final train loss | vs zero3 | held-out loss | vs zero3 |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        fin = smooth_tail(r["losses"], args.tail)
        z = ref.get(r["seed"])
        d1 = f"{100 * (fin / smooth_tail(z['losses'], args.tail) - 1):+.2f}%" if z else "-"
        d2 = f"{100 * (r['held'] / z['held'] - 1):+.2f}%" if z else "-"
        lines.append(f"| {r['seed']} | {r['variant']} | {r['losses'][0]:.4f} | {fin:.4f} | {d1} "
                     f"| {r['held']:.4f} | {d2} |")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in results:
        k = 10
        sm = [sum(r["losses"][max(0, i - k + 1):i + 1]) / len(r["losses"][max(0, i - k + 1):i + 1])
              for i in range(len(r["losses"]))]
        ax.plot(sm, label=f"{r['variant']} seed {r['seed']}", lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (nats/byte, 10-step mean)")
    ax.set_title(f"ZeRO-3 vs ZeRO++ ({args.tag})")
    ax.legend()
    fig.savefig(base + ".png", dpi=100)


if __name__ == "__main__":
    main()
