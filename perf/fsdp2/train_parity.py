"""FSDP2 training parity: a small GPT-style byte-level model trained with fully_shard on 4 ranks
as 2 emulated nodes (ZCOLL_HOSTID), on real English text that ships on the machine (Vim's
documentation, /usr/share/vim/vim*/doc/*.txt, Debian package vim-runtime; no download).

    python3 perf/fsdp2/train_parity.py --config gloo|zcoll|zeropp|zeropp8|zeropp4w --steps 300 --seed 0

gloo: FSDP2 on gloo. zcoll: FSDP2 on zcoll, unquantized. zeropp: zcoll.fsdp.zeropp() (qwZ INT8
weights, hpZ, qgZ INT4 gradients). zeropp8: the same with INT8 gradients. zeropp4w: INT4 weights
and INT4 gradients (the fewest bytes). Writes one JSON file
(--out, default perf/fsdp2/results/<config>_seed<seed>.json) and prints it: the settings, the
training loss per step (mean over ranks), and the held-out loss at the end, twice: on the trained
parameters themselves (each gathered exactly with DTensor.full_tensor into a plain copy of the
model: what a checkpoint holds) and through the FSDP model's own forward (for ZeRO++ that
forward multiplies with qwZ's quantized weights). perf/fsdp2/parity_report.py makes the table
and the plot.
"""
import argparse
import glob
import json
import os
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

WORLD, LOCAL = 4, 2


def corpus():
    files = sorted(glob.glob("/usr/share/vim/vim*/doc/*.txt"))
    if not files:
        raise SystemExit("no text: install Debian's vim-runtime (Vim's docs) or edit corpus()")
    data = b"".join(open(f, "rb").read() for f in files)
    data = torch.frombuffer(bytearray(data), dtype=torch.uint8).long()
    cut = int(len(data) * 0.95)
    return data[:cut], data[cut:]


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        t = x.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), 1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, d, layers, heads, ctx):
        super().__init__()
        self.tok, self.pos = nn.Embedding(256, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 256, bias=False)
        self.head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def batch(data, gen, bsz, ctx):
    starts = torch.randint(0, len(data) - ctx - 1, (bsz,), generator=gen)
    seq = torch.stack([data[s:s + ctx + 1] for s in starts])
    return seq[:, :-1], seq[:, 1:]


def worker(rank, path, args, out):
    torch.set_num_threads(1)
    os.environ["ZCOLL_HOSTID"] = f"node{rank // LOCAL}"
    backend = "gloo" if args.config == "gloo" else "zcoll"
    if backend == "zcoll":
        import zcoll  # noqa: F401
    dist.init_process_group(backend, init_method=f"file://{path}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=120))
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    train, held = corpus()
    torch.manual_seed(args.seed)
    model = GPT(args.d, args.layers, args.heads, args.ctx)
    mesh = init_device_mesh("cpu", (WORLD,))
    if args.config.startswith("zeropp"):
        import zcoll.fsdp
        zcoll.fsdp.zeropp(model, modules=model.blocks, mesh=mesh,
                          weight_bits=4 if args.config == "zeropp4w" else 8,
                          grad_bits=8 if args.config == "zeropp8" else 4,
                          grad_intra_bits=8 if args.config == "zeropp8" else 4)
    else:
        for b in model.blocks:
            fully_shard(b, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
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
    trained = GPT(args.d, args.layers, args.heads, args.ctx)  # the parameters, gathered exactly
    trained.load_state_dict({n: p.full_tensor() for n, p in model.named_parameters()},
                            strict=False)  # head.weight is tok.weight (tied)
    held_loss = heldout(trained, held, rank, args)
    held_fsdp = heldout(model, held, rank, args)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"config": args.config, "seed": args.seed, "steps": args.steps,
                       "settings": vars(args), "torch": torch.__version__,
                       "params": sum(p.numel() for p in trained.parameters()),
                       "train_loss": losses,
                       "final_train_loss_avg10": sum(losses[-10:]) / len(losses[-10:]),
                       "heldout_loss": held_loss, "heldout_loss_fsdp_forward": held_fsdp,
                       "seconds": elapsed}, f)
    dist.destroy_process_group()


@torch.no_grad()
def heldout(model, held, rank, args):
    """Mean cross-entropy over --eval-batches held-out batches per rank, averaged over the
    ranks (every model sees the same batches: the generator is seeded by rank only)."""
    hgen = torch.Generator().manual_seed(999 + rank)
    total = torch.zeros(())
    for _ in range(args.eval_batches):
        x, y = batch(held, hgen, args.bsz, args.ctx)
        total += F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
    total /= args.eval_batches * WORLD
    dist.all_reduce(total)
    return total.item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, choices=["gloo", "zcoll", "zeropp", "zeropp8",
                                                          "zeropp4w"])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--bsz", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eval-batches", type=int, default=32)
    p.add_argument("--out", help="JSON file (default perf/fsdp2/results/<config>_seed<seed>.json)")
    args = p.parse_args()
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                        f"{args.config}_seed{args.seed}.json")
    os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("UCX_NET_DEVICES", "lo")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(worker, args=(os.path.join(d, "store"), args, args.out), nprocs=WORLD,
                           join=True, start_method="fork")
    print(open(args.out).read())


if __name__ == "__main__":
    main()
