"""dist.shrink_group on zcoll (issue 33): the backend's shrink over zcollCommShrink. 3 ranks:
one dies without a word, the others see their next all_reduce fail and shrink with SHRINK_ABORT;
a healthy shrink (SHRINK_DEFAULT) leaving out a rank that is alive and does not call; bad input.
Skipped where torch has no shrink_group (torch < 2.10)."""
import os
import tempfile
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

CPU = torch.device("cpu")

if not hasattr(dist, "shrink_group"):
    pytest.skip(f"torch {torch.__version__} has no torch.distributed.shrink_group (torch >= 2.10 "
                f"has it)", allow_module_level=True)

SHRINK_DEFAULT = getattr(c10d, "SHRINK_DEFAULT", 0)
SHRINK_ABORT = getattr(c10d, "SHRINK_ABORT", 1)


def _worker(rank, world, path, scenario, result_dir):
    import zcoll
    assert zcoll._C.supports_shrink, "this zcoll build has no shrink for a torch with shrink_group"
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    SCENARIOS[scenario](rank, world, result_dir)
    if dist.is_initialized():
        dist.destroy_process_group()


def _run(scenario, world=3):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(world, os.path.join(d, "store"), scenario, d),
                           nprocs=world, join=True, start_method="fork")
        return {name: open(os.path.join(d, name)).read()
                for name in os.listdir(d) if name.endswith(".txt")}


def _store():
    return c10d._get_default_store()


def _check_shrunk(group, old_rank, survivors):
    """The new default group: ranks renumbered in the old order, exact collectives."""
    new_rank = survivors.index(old_rank)
    assert group.rank() == new_rank and group.size() == len(survivors)
    assert dist.get_rank() == new_rank and dist.get_world_size() == len(survivors)
    assert dist.group.WORLD is group
    assert group._get_backend(CPU).supports_shrinking
    t = torch.arange(1000, dtype=torch.float32) * (old_rank + 1)
    dist.all_reduce(t)
    factor = sum(r + 1 for r in survivors)
    assert torch.equal(t, torch.arange(1000, dtype=torch.float32) * factor)
    outs = [torch.empty(7, dtype=torch.int64) for _ in survivors]
    dist.all_gather(outs, torch.full((7,), 10 * old_rank, dtype=torch.int64))
    for i, r in enumerate(survivors):
        assert torch.equal(outs[i], torch.full((7,), 10 * r, dtype=torch.int64))
    out = torch.empty(3 * len(survivors))
    dist.all_gather_into_tensor(out, torch.full((3,), float(new_rank)))
    assert torch.equal(out, torch.arange(len(survivors)).repeat_interleave(3).float())


# ---- a rank dies: the others see the error, shrink with SHRINK_ABORT and go on -------------

DEAD = 1  # a middle rank: the survivors 0, 2 become 0, 1


def scenario_dead_rank(rank, world, result_dir):
    t = torch.ones(16)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((16,), float(world)))
    store = _store()
    survivors = [r for r in range(world) if r != DEAD]
    if rank == DEAD:
        # Dies once the others are through the first all_reduce: no destroy, no abort, no word.
        store.wait([f"step1/{r}" for r in survivors], timedelta(seconds=60))
        os._exit(0)
    store.set(f"step1/{rank}", "1")
    start = time.monotonic()
    with pytest.raises(dist.DistBackendError, match="zcoll"):
        t = torch.ones(16)
        dist.all_reduce(t)  # the dead rank never joins
    detected = time.monotonic() - start
    assert detected < 10, f"the dead rank was seen after {detected:.1f} s"

    start = time.monotonic()
    group = dist.shrink_group([DEAD], shrink_flags=SHRINK_ABORT)
    shrunk = time.monotonic() - start
    _check_shrunk(group, rank, survivors)
    with open(os.path.join(result_dir, f"dead_{rank}.txt"), "w") as f:
        f.write(f"{detected:.4f} {shrunk:.4f}")


def test_shrink_after_a_rank_dies():
    times = _run("dead_rank")
    assert sorted(times) == ["dead_0.txt", "dead_2.txt"]
    for name, text in sorted(times.items()):
        detected, shrunk = map(float, text.split())
        print(f"{name}: error after {detected * 1000:.0f} ms, shrink_group {shrunk * 1000:.0f} ms")


# ---- a healthy shrink: the excluded rank is alive and does not call ------------------------

EXCLUDED = 0  # the rendezvous root: the shrink needs nothing from it


def scenario_healthy(rank, world, result_dir):
    t = torch.ones(16)
    dist.all_reduce(t)
    store = _store()
    survivors = [r for r in range(world) if r != EXCLUDED]
    queued = torch.full((1 << 16,), float(rank))
    work = dist.all_reduce(queued, async_op=True)  # may still be queued on the parent at the shrink
    if rank == EXCLUDED:
        # Alive and idle until the others have their new group, then leaves as usual.
        work.wait()
        store.wait([f"shrunk/{r}" for r in survivors], timedelta(seconds=60))
        return
    start = time.monotonic()
    group = dist.shrink_group([EXCLUDED], shrink_flags=SHRINK_DEFAULT)
    shrunk = time.monotonic() - start
    # SHRINK_DEFAULT: what was queued on the parent ran first, complete and exact.
    assert work.is_completed()
    assert torch.equal(queued, torch.full((1 << 16,), float(sum(range(world)))))
    _check_shrunk(group, rank, survivors)
    store.set(f"shrunk/{rank}", "1")
    with open(os.path.join(result_dir, f"healthy_{rank}.txt"), "w") as f:
        f.write(f"{shrunk:.4f}")


def test_shrink_healthy_group():
    times = _run("healthy")
    assert sorted(times) == ["healthy_1.txt", "healthy_2.txt"]
    for name, text in sorted(times.items()):
        print(f"{name}: shrink_group {float(text) * 1000:.0f} ms")


# ---- bad input: clear errors, the group untouched ------------------------------------------

def scenario_bad_input(rank, world, result_dir):
    b = dist.group.WORLD._get_backend(CPU)
    assert b.supports_shrinking
    with pytest.raises(ValueError, match="out of bounds"):  # torch's own check
        dist.shrink_group([world])
    # The backend's checks (a direct Backend.shrink), before any exchange.
    with pytest.raises(ValueError, match=r"rank 3 in ranks_to_exclude is not a rank of this "
                                         r"group \(size 3"):
        b.shrink([world])
    with pytest.raises(ValueError, match="rank -1 in ranks_to_exclude is not a rank"):
        b.shrink([-1])
    with pytest.raises(ValueError, match="repeated"):
        b.shrink([(rank + 1) % world, (rank + 1) % world])
    with pytest.raises(ValueError, match="names every rank"):
        b.shrink(list(range(world)))
    with pytest.raises(ValueError, match=rf"this rank \({rank}\) is in ranks_to_exclude"):
        b.shrink([rank])
    with pytest.raises(ValueError, match="unknown shrink_flags 7"):
        b.shrink([(rank + 1) % world], 7)
    with pytest.raises(ValueError, match="empty"):
        b.shrink([])
    t = torch.full((5,), float(rank))
    dist.all_reduce(t)  # still healthy, nobody waits on a shrink
    assert torch.equal(t, torch.full((5,), float(sum(range(world)))))


def test_shrink_bad_input():
    _run("bad_input")


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items()
             if name.startswith("scenario_")}
