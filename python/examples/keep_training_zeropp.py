"""Keep a ZeRO++ training loop going when a rank dies: the weights are sharded over the ranks
(ZeRO-3), gathered with hpZ (forward from the nodes' rails into a secondary shard, backward from
that secondary), the gradients reduce-scattered with qgZ, and SGD with momentum updates each
rank's shard. One rank is killed mid-run; the others shrink their group (dist.shrink_group),
rebuild the dead rank's weight shard from hpZ's secondary copies on the other node and its
momentum from the opt-in buddy copy, re-partition both over the new world size, and go on with
qwZ gathers and flat qgZ (the nodes are uneven now). No checkpoint is read.

    tools/zcollrun --keep-going -n 4 --nodes 2 python3 python/examples/keep_training_zeropp.py

The version every survivor still holds is the last step whose forward gather succeeded on all
of them (secondaries and state copies are kept for two steps in turn; docs/FAULT_TOLERANCE.md,
"Keep training"); that step runs again on the new group. With the exact hpZ gather (the
default) the rebuilt weights are checked bit-identical to what that step's forward gathered;
--int8 gathers as ZeRO++ does (INT8 on the rail), and a dead rank's rebuilt shard is then the
dequantized copy every rank computed with. Who died is for the job to say, as with NCCL: each
survivor leaves a file in --alive-dir and reads the others' (one machine). Needs a torch with
dist.shrink_group. The victim must not be rank 0: torch.distributed's store (MASTER_ADDR) runs
in rank 0's process, and the group shrink_group makes still uses it.
"""
import argparse
import math
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

import zcoll.zeropp as zpp


def make_model():
    torch.manual_seed(0)  # the same initial weights everywhere
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def batch(step, rank, n=64):
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(n, 16, generator=g)
    return x, (x[:, :4].sum(dim=1, keepdim=True) > 0).float()


class Shards:
    """This rank's part of the model: weight and momentum shards of the flat parameter vector,
    and the copies kept for the last two steps (by step % 2)."""

    def __init__(self, total, weights, momentum):
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.total = total
        self.count = math.ceil(total / self.world)
        self.w, self.m = weights, momentum  # this rank's shards (count elements)
        sizes = torch.tensor([zpp.local_size()] * 2)
        dist.all_reduce(sizes[:1], op=dist.ReduceOp.MIN)
        dist.all_reduce(sizes[1:], op=dist.ReduceOp.MAX)
        self.even = bool(sizes[0] == sizes[1])  # hpZ runs on even nodes only
        secondary = zpp.secondary_shard_numel(self.count)
        self.secondary = [torch.zeros(secondary) for _ in range(2)]
        self.gathered = [torch.zeros(self.count * self.world) for _ in range(2)]
        self.saved_w = [torch.zeros(self.count) for _ in range(2)]
        self.saved_m = [torch.zeros(self.count) for _ in range(2)]
        self.m_copy = [torch.zeros(zpp.buddy_copy_numel(self.count)) for _ in range(2)]
        self.last_good = -1  # the last step whose forward gather succeeded here

    @classmethod
    def first(cls, model):
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        world, rank = dist.get_world_size(), dist.get_rank()
        count = math.ceil(flat.numel() / world)
        padded = torch.zeros(count * world)
        padded[:flat.numel()] = flat
        return cls(flat.numel(), padded[rank * count:(rank + 1) * count].clone(),
                   torch.zeros(count))


def train_step(s, model, step, lr, int8):
    k = step % 2
    s.saved_w[k].copy_(s.w)
    s.saved_m[k].copy_(s.m)
    zpp.buddy_copy(s.m_copy[k], s.m)  # the momentum of version `step` on the next node
    full = s.gathered[k]
    if s.even:
        zpp.all_gather_hier(full, s.w, s.secondary[k], quantized=int8)
    else:
        zpp.quantized_all_gather(full, s.w)
    s.last_good = step
    torch.nn.utils.vector_to_parameters(full[:s.total], model.parameters())
    x, y = batch(step, s.rank)
    for p in model.parameters():
        p.grad = None
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
    loss.backward()
    again = torch.empty_like(full)  # the backward pass gathers the weights again
    if s.even:
        zpp.all_gather_from_secondary(again, s.secondary[k])
    else:
        zpp.quantized_all_gather(again, s.w)
    assert torch.equal(again, full), "the backward gather differs from the forward one"
    grads = torch.zeros(s.count * s.world)
    grads[:s.total] = torch.cat([p.grad.flatten() for p in model.parameters()])
    mine = torch.empty(s.count)
    zpp.quantized_reduce_scatter(mine, grads, op=dist.ReduceOp.AVG)
    s.m.mul_(0.9).add_(mine)
    s.w.sub_(lr * s.m)
    return loss.item()


def survivors(alive_dir, rank, world, wait_s):
    """The ranks that are still alive: each leaves a file, then reads the others'."""
    open(os.path.join(alive_dir, f"alive.{rank}"), "w").close()
    time.sleep(wait_s)
    return sorted(r for r in range(world) if os.path.exists(os.path.join(alive_dir, f"alive.{r}")))


def recover(s, alive_dir, wait_s, check_exact):
    """Shrink without the dead, agree on the version, rebuild weights and momentum over the
    new world size; returns the new Shards and the step to run again."""
    world, rank = dist.get_world_size(), dist.get_rank()
    gone = [r for r in range(world) if r not in survivors(alive_dir, rank, world, wait_s)]
    t = time.perf_counter()
    dist.shrink_group(gone, shrink_flags=c10d.SHRINK_ABORT)
    shrink_ms = (time.perf_counter() - t) * 1e3
    version = torch.tensor([s.last_good])
    dist.all_reduce(version, op=dist.ReduceOp.MIN)  # every survivor holds this one
    v = int(version)
    k = v % 2
    count = math.ceil(s.total / dist.get_world_size())
    w, m = torch.empty(count), torch.empty(count)
    t = time.perf_counter()
    zpp.rebuild_from_secondary(w, s.secondary[k], s.count, s.total, primary=s.saved_w[k])
    zpp.rebuild_from_buddy(m, s.saved_m[k], s.m_copy[k], s.total)
    rebuild_ms = (time.perf_counter() - t) * 1e3
    if check_exact:  # the weights as step v's forward gathered them, bit for bit
        everyone = torch.empty(count * dist.get_world_size())
        dist.all_gather_into_tensor(everyone, w)
        assert torch.equal(everyone[:s.total], s.gathered[k][:s.total]), "rebuilt weights differ"
    if dist.get_rank() == 0:
        print(f"ranks {gone} gone; shrink_group took {shrink_ms:.0f} ms; weights and momentum "
              f"rebuilt over {dist.get_world_size()} ranks in {rebuild_ms:.1f} ms (no "
              f"checkpoint){', bit-identical' if check_exact else ''}; back to step {v}",
              flush=True)
    return Shards(s.total, w, m), v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--victim", type=int, default=1,
                    help="the rank that dies (default 1; not 0, which holds torch's store)")
    ap.add_argument("--kill-step", type=int, default=8, help="when it dies (default 8)")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--int8", action="store_true", help="hpZ's rail in INT8, as ZeRO++")
    ap.add_argument("--alive-wait", type=float, default=1.0,
                    help="seconds a survivor waits for the others' files (default 1)")
    ap.add_argument("--alive-dir", default=os.path.join(tempfile.gettempdir(), "zcoll-alive-"
                                                        + os.environ.get("MASTER_PORT", "x")))
    args = ap.parse_args()
    if args.victim == 0:
        ap.error("--victim 0: rank 0 runs torch.distributed's store, which the shrunk group needs")
    os.makedirs(args.alive_dir, exist_ok=True)
    dist.init_process_group("zcoll")
    model = make_model()
    s = Shards.first(model)
    victim = dist.get_rank() == args.victim  # ranks are renumbered after the shrink
    step = 0
    while step < args.steps:
        if step == args.kill_step and victim:
            os._exit(1)  # dies without a word: no destroy, no notice
        started = time.perf_counter()
        try:
            loss = train_step(s, model, step, args.lr, args.int8)
        except dist.DistBackendError as err:
            if dist.get_rank() == 0:
                print(f"step {step}: {type(err).__name__} after "
                      f"{(time.perf_counter() - started) * 1e3:.0f} ms", flush=True)
            s, step = recover(s, args.alive_dir, args.alive_wait, check_exact=not args.int8)
            continue
        if dist.get_rank() == 0 and step % 4 == 0:
            print(f"step {step}: loss {loss:.4f} on {dist.get_world_size()} ranks "
                  f"({'hpZ' if s.even else 'qwZ, uneven nodes'})", flush=True)
        step += 1
    if dist.get_rank() == 0:
        print(f"done: {args.steps} steps, {dist.get_world_size()} ranks, loss {loss:.4f}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
