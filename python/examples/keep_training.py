"""Keep training when a rank dies: data-parallel SGD on the zcoll backend, one rank killed
mid-run, the others shrink their group (dist.shrink_group over zcollCommShrink) and go on.

    tools/zcollrun --keep-going -n 3 python3 python/examples/keep_training.py --victim 1

Every rank holds the whole model (data parallel: gradients averaged with all_reduce), so the
ranks that remain lose nothing but the dead rank's share of each batch. Who died is for the
job to say, as with NCCL: here each survivor leaves a file in --alive-dir and reads the
others' (one machine; across machines use your launcher's or a shared store). Prints the loss
every few steps, the time the failure took to show and the shrink, and checks at the end that
every remaining replica holds the same weights. Needs a torch with dist.shrink_group.
"""
import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

import zcoll  # noqa: F401  (registers the backend on a torch that loads none by name)


def batch(step, rank, n=64):
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(n, 16, generator=g)
    return x, (x[:, :4].sum(dim=1, keepdim=True) > 0).float()


def train_step(model, opt, step, rank, world):
    x, y = batch(step, rank)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():  # average the gradients over the ranks
        dist.all_reduce(p.grad)
        p.grad /= world
    opt.step()
    return loss.item()


def survivors(alive_dir, rank, world, wait_s):
    """The ranks that are still alive: each leaves a file, then reads the others'."""
    open(os.path.join(alive_dir, f"alive.{rank}"), "w").close()
    time.sleep(wait_s)
    return sorted(r for r in range(world) if os.path.exists(os.path.join(alive_dir, f"alive.{r}")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--victim", type=int, default=1, help="the rank that dies (default 1)")
    ap.add_argument("--kill-step", type=int, default=10, help="when it dies (default 10)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--alive-wait", type=float, default=1.0,
                    help="seconds a survivor waits for the others' files (default 1)")
    ap.add_argument("--alive-dir", default=os.path.join(tempfile.gettempdir(), "zcoll-alive-"
                                                        + os.environ.get("MASTER_PORT", "x")))
    args = ap.parse_args()
    os.makedirs(args.alive_dir, exist_ok=True)
    dist.init_process_group("zcoll")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = 0
    while step < args.steps:
        if step == args.kill_step and rank == args.victim:
            os._exit(1)  # dies without a word: no destroy, no notice
        started = time.perf_counter()
        try:
            loss = train_step(model, opt, step, rank, dist.get_world_size())
        except dist.DistBackendError as err:
            failed_after = time.perf_counter() - started
            alive = survivors(args.alive_dir, rank, world, wait_s=args.alive_wait)
            gone = [r for r in range(world) if r not in alive]
            t = time.perf_counter()
            dist.shrink_group(gone, shrink_flags=c10d.SHRINK_ABORT)
            if dist.get_rank() == 0:
                print(f"step {step}: {type(err).__name__} after {failed_after * 1e3:.0f} ms; "
                      f"ranks {gone} gone; shrink_group took {(time.perf_counter() - t) * 1e3:.0f} "
                      f"ms; {dist.get_world_size()} ranks go on", flush=True)
            # The failed step's update was not applied (its all_reduce raised before opt.step on
            # every rank that stays), so the step is simply run again on the smaller group.
            # (A rank whose step had gone further would need its state restored first.)
            continue
        if dist.get_rank() == 0 and step % 5 == 0:
            print(f"step {step}: loss {loss:.4f} on {dist.get_world_size()} ranks", flush=True)
        step += 1
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, flat)
    assert all(torch.equal(flat, other) for other in everyone), "the replicas differ"
    if dist.get_rank() == 0:
        print(f"done: {args.steps} steps, {dist.get_world_size()} replicas identical", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
