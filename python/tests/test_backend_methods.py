"""The Backend methods torch and FSDP2 call beyond the collectives (issue 31): PREMUL_SUM,
supports_tensor_alloc / allocate_tensor, supports_splitting / split (dist.split_group, new_group
splitting a group bound with device_id), abort / shutdown, get_error, set_timeout, the watchdog; and the
request-based CPU path (issue 29): a future completes with valid outputs though nobody waits."""
import faulthandler
import os
import tempfile
import time
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

from torch._C._distributed_c10d import ErrorType  # noqa: E402
from torch_features import (BACKEND_GET_ERROR, CPU_DEVICE_ID, CPU_DEVICE_ID_WHY,  # noqa: E402
                            CPU_SPLIT_GROUP, CPU_SPLIT_GROUP_WHY, SET_TIMEOUT, SET_TIMEOUT_WHY)

CPU = torch.device("cpu")
CPU0 = torch.device("cpu", 0)  # init_process_group's device_id needs an index


def _backend(group=None):
    return (group or dist.group.WORLD)._get_backend(CPU)


def _worker(rank, world, path, scenario, init_kwargs):
    import zcoll  # noqa: F401
    if scenario == "set_timeout":
        os.environ.pop("ZCOLL_TIMEOUT", None)  # torch's timeouts govern only without it
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60), **init_kwargs)
    SCENARIOS[scenario](rank, world)
    if dist.is_initialized():
        dist.destroy_process_group()


def _run(scenario, world=2, **init_kwargs):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(world, os.path.join(d, "store"), scenario, init_kwargs),
                           nprocs=world, join=True, start_method="fork")


# ---- PREMUL_SUM ---------------------------------------------------------------------------

def scenario_premul_sum(rank, world):
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        x = torch.arange(8 * world, dtype=dtype) + rank  # integers: every product exact
        for factor in (0.5, torch.tensor([0.25], dtype=dtype)):
            op = dist._make_nccl_premul_sum(factor)
            f = float(factor) if isinstance(factor, float) else factor.item()
            expect = sum((torch.arange(8 * world, dtype=torch.float64) + r) * f
                         for r in range(world)).to(dtype)

            t = x.clone()
            dist.all_reduce(t, op=op)
            assert torch.equal(t, expect), (dtype, factor)

            nc = x.clone().view(2, -1).t()  # non-contiguous: scaled copy, copied back
            dist.all_reduce(nc, op=op)
            assert torch.equal(nc, expect.view(2, -1).t()), (dtype, factor)

            out = torch.empty(8, dtype=dtype)
            dist.reduce_scatter_tensor(out, x, op=op)
            assert torch.equal(out, expect[8 * rank:8 * (rank + 1)]), (dtype, factor)

            outs = [torch.empty(4, dtype=dtype) for _ in range(world)]  # as FSDP2 issues them
            with dist._coalescing_manager(device=CPU):
                for o in outs:
                    dist.reduce_scatter_tensor(o, x[:4 * world], op=op)
            for o in outs:
                assert torch.equal(o, expect[4 * rank:4 * (rank + 1)])

            t = x.clone()
            dist.reduce(t, dst=0, op=op)
            if rank == 0:
                assert torch.equal(t, expect)
            assert torch.equal(x, torch.arange(8 * world, dtype=dtype) + rank)  # input untouched
    # The integer case is refused, naming the op.
    with pytest.raises(TypeError,
                       match=r"PREMUL_SUM needs a floating-point tensor \(got torch\.int32\)"):
        dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist._make_nccl_premul_sum(2.0))


def test_premul_sum():
    _run("premul_sum", 2)


def test_premul_sum_three_ranks():
    _run("premul_sum", 3)


# ---- allocate_tensor ----------------------------------------------------------------------

def scenario_allocate_tensor(rank, world):
    b = _backend()
    assert b.supports_tensor_alloc(CPU)
    assert not b.supports_tensor_alloc(torch.device("cuda", 0))
    t = b.allocate_tensor(10 * world, dtype=torch.bfloat16, device=CPU)
    assert t.shape == (10 * world,) and t.dtype == torch.bfloat16 and t.device == CPU
    shard = torch.full((10,), float(rank), dtype=torch.bfloat16)
    dist.all_gather_into_tensor(t, shard)
    assert torch.equal(t, torch.arange(world).repeat_interleave(10).to(torch.bfloat16))
    with pytest.raises(RuntimeError, match="allocate_tensor gives host memory"):
        b.allocate_tensor(4, dtype=torch.float32, device=torch.device("cuda", 0))
    # What stays unsupported names the method.
    with pytest.raises(RuntimeError, match="zcoll does not support getMemAllocator"):
        b.mem_allocator
    if hasattr(b, "new_window"):  # not in torch 2.11
        with pytest.raises(RuntimeError, match="zcoll does not support new_window"):
            b.new_window()
    # shrink is supported where torch has it (test_shrink.py).
    import zcoll
    assert b.supports_shrinking == zcoll._C.supports_shrink


def test_allocate_tensor():
    _run("allocate_tensor", 2)


# ---- splitting ----------------------------------------------------------------------------

def scenario_split_group(rank, world):
    assert _backend().supports_splitting
    # Ranks 0, 1 in one group, 2 in another (dist.split_group over zcollCommSplit).
    sub = dist.split_group(split_ranks=[[0, 1], [2]])
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t, group=sub)
    mine = [0, 1] if rank < 2 else [2]
    assert torch.equal(t, torch.full((4,), float(sum(r + 1 for r in mine))))
    assert dist.get_world_size(sub) == len(mine)
    # The parent still works, in order with its child.
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(world)))
    # A rank in no split group: no group.
    only = dist.split_group(split_ranks=[[1, 2]])
    # The parent stays in step: torch asks a non-member's backend to split once per device type
    # (cpu, cuda) but a member's once; a second zcollCommSplit on rank 0 met this barrier.
    dist.barrier()
    if rank == 0:
        assert only is dist.GroupMember.NON_GROUP_MEMBER
    else:
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, group=only)
        assert torch.equal(t, torch.full((3,), 3.0))
        dist.destroy_process_group(only)
    dist.destroy_process_group(sub)


@pytest.mark.skipif(not CPU_SPLIT_GROUP, reason=CPU_SPLIT_GROUP_WHY)
def test_split_group():
    _run("split_group", 3)


def scenario_new_group_split(rank, world):
    # Bound with device_id: new_group splits the default group (non-members take no color).
    assert dist.group.WORLD.bound_device_id == CPU0
    g = dist.new_group([0, 2])
    if rank in (0, 2):
        t = torch.full((4,), float(rank))
        dist.all_reduce(t, group=g)
        assert torch.equal(t, torch.full((4,), 2.0))
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(world)))


@pytest.mark.skipif(not CPU_DEVICE_ID, reason=CPU_DEVICE_ID_WHY)
def test_new_group_splits_a_bound_group():
    _run("new_group_split", 3, device_id=CPU0)


# ---- abort / shutdown / get_error -------------------------------------------------------------

def scenario_abort(rank, world):
    b = _backend()
    assert not BACKEND_GET_ERROR or b.get_error() == ErrorType.SUCCESS
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(1)  # rank 0's request is queued, waiting for rank 1, when it aborts
        dist.distributed_c10d._abort_process_group()
        return
    work = dist.all_reduce(torch.ones(1 << 16), async_op=True)
    time.sleep(0.2)
    dist.distributed_c10d._abort_process_group()
    with pytest.raises(dist.DistBackendError):
        work.wait()
    assert not BACKEND_GET_ERROR or b.get_error() != ErrorType.SUCCESS
    with pytest.raises(dist.DistBackendError, match="aborted"):
        b.allreduce([torch.ones(1)])


def test_abort_fails_pending_work():
    _run("abort", 2)


def scenario_shutdown(rank, world):
    # Async work nobody waits for, then destroy_process_group (which calls shutdown): it runs
    # first, and its future has valid outputs.
    outs = [torch.empty(4) for _ in range(world)]
    work = dist.all_gather(outs, torch.full((4,), float(rank)), async_op=True)
    fut = work.get_future()
    dist.destroy_process_group()
    assert fut.done()
    for r, o in enumerate(outs):
        assert torch.equal(o, torch.full((4,), float(r)))


def test_shutdown_runs_issued_work():
    _run("shutdown", 2)


# ---- failures and the watchdog (python/README.md, "Failures and the watchdog") ------------

def _group_gone(b):
    """Whether the group's communicator is gone (aborted), rather than broken."""
    try:
        b.allreduce([torch.ones(1)]).wait()
    except dist.DistBackendError as e:
        return "its communicator is gone" in str(e)
    raise AssertionError("an operation on a failed group succeeded")


def scenario_watchdog(rank, world):
    # Rank 1 aborts while rank 0 has two operations outstanding: one running (waiting for rank
    # 1), one queued behind it. Both Works fail; rank 0's watchdog sees the async error.
    mode = os.environ["ZCOLL_TORCH_ASYNC_ERROR_HANDLING"]
    b = _backend()
    dist.all_reduce(torch.ones(4))
    if rank == 1:
        time.sleep(1)
        dist.distributed_c10d._abort_process_group()
        return
    running = dist.all_reduce(torch.ones(1 << 16), async_op=True)
    queued = dist.all_reduce(torch.ones(4), async_op=True)
    for work in (running, queued):
        with pytest.raises(dist.DistBackendError):
            work.wait()
        assert work.is_completed()
        assert not work.is_success()
        assert work.exception() is not None
    if mode == "1":
        faulthandler.disable()  # its abort() is expected: no Python stack dump
        time.sleep(60)  # the watchdog ends this process first
        raise AssertionError("the watchdog did not end the process")
    deadline = time.monotonic() + 20
    if mode == "2":  # the watchdog aborts the group within its interval
        while not _group_gone(b):
            assert time.monotonic() < deadline, "the watchdog did not abort the group"
            time.sleep(0.05)
    else:  # 0: the group stays (broken), for shrink_group
        time.sleep(0.5)  # five intervals of the watchdog
        assert not _group_gone(b)
    assert not BACKEND_GET_ERROR or b.get_error() != ErrorType.SUCCESS


@pytest.mark.parametrize("mode", ["0", "2"])
def test_watchdog_sees_a_peer_abort(mode, monkeypatch, capfd):
    monkeypatch.setenv("ZCOLL_TORCH_ASYNC_ERROR_HANDLING", mode)
    _run("watchdog", 2)
    err = capfd.readouterr().err
    assert "zcoll: watchdog: the communicator torch:" in err, err[-2000:]
    assert f"ZCOLL_TORCH_ASYNC_ERROR_HANDLING={mode}, " in err, err[-2000:]


def test_watchdog_tear_down_ends_the_process(monkeypatch, capfd):
    monkeypatch.setenv("ZCOLL_TORCH_ASYNC_ERROR_HANDLING", "1")
    with pytest.raises(mp.ProcessExitedException) as ended:
        _run("watchdog", 2)
    assert ended.value.error_index == 0
    assert ended.value.signal_name == "SIGABRT"
    assert "zcoll: watchdog: ending the process" in capfd.readouterr().err


def _init_refused_worker(rank, world, path):
    import zcoll  # noqa: F401
    with pytest.raises(ValueError, match="ZCOLL_TORCH_ASYNC_ERROR_HANDLING=5 is not valid"):
        dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=60))


def test_an_unknown_async_error_handling_is_refused(monkeypatch):
    monkeypatch.setenv("ZCOLL_TORCH_ASYNC_ERROR_HANDLING", "5")
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_init_refused_worker, args=(1, os.path.join(d, "store")), nprocs=1,
                           join=True, start_method="fork")


# ---- set_timeout --------------------------------------------------------------------------

def scenario_set_timeout(rank, world):
    dist.set_timeout(timedelta(milliseconds=500))
    dist.barrier()
    t = torch.ones(4)
    if rank == 1:
        time.sleep(2)
    work = dist.all_reduce(t, async_op=True)
    if rank == 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="timed out after 500 ms"):
            work.wait()
        assert time.monotonic() - start < 1.9
    work.wait(timeout=timedelta(seconds=30))  # not cancelled
    assert torch.all(t == world)


@pytest.mark.skipif(not SET_TIMEOUT, reason=SET_TIMEOUT_WHY)
def test_set_timeout_bounds_wait():
    _run("set_timeout", 2)


def scenario_set_timeout_env(rank, world):
    # ProcessGroup.set_timeout's binding turns no C++ warning into a Python one: TORCH_WARN
    # writes it to stderr (checked by the test through the inherited descriptor).
    dist.set_timeout(timedelta(milliseconds=100))
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.all(t == world)


@pytest.mark.skipif(not SET_TIMEOUT, reason=SET_TIMEOUT_WHY)
def test_set_timeout_ignored_under_zcoll_timeout(monkeypatch, capfd):
    monkeypatch.setenv("ZCOLL_TIMEOUT", "60")
    _run("set_timeout_env", 2)
    assert "ZCOLL_TIMEOUT is set" in capfd.readouterr().err


# ---- futures complete without a wait -------------------------------------------------------

def scenario_future_without_wait(rank, world):
    # Operations whose outputs need copies back (a list, a non-contiguous tensor, a coalesced
    # all-reduce): the completion copies them, so the future's value is valid with no wait().
    outs = [torch.empty(3) for _ in range(world)]
    w1 = dist.all_gather(outs, torch.full((3,), float(rank)), async_op=True)
    nc = torch.ones(4, 2).t()
    w2 = dist.all_reduce(nc, async_op=True)
    seen = []
    f3 = w2.get_future().then(lambda f: seen.append(f.value()[0].clone()))
    for f in (w1.get_future(), w2.get_future(), f3):
        deadline = time.monotonic() + 30
        while not f.done():
            assert time.monotonic() < deadline
            time.sleep(0.001)
    for r, o in enumerate(w1.get_future().value()):
        assert torch.equal(o, torch.full((3,), float(r)))
    assert torch.equal(nc, torch.full((2, 4), float(world)))
    assert torch.equal(seen[0], nc)
    # An operation that copies its input when issued sees what the one before wrote to it.
    t = torch.ones(2, 4)
    dist.all_reduce(t, async_op=True)
    w = dist.all_reduce(t.t(), async_op=True)  # reads t: after the first one completes
    w.wait()
    assert torch.equal(t, torch.full((2, 4), float(world * world)))


def test_future_completes_without_wait():
    _run("future_without_wait", 2)


SCENARIOS = {f.__name__[len("scenario_"):]: f for f in
             [scenario_premul_sum, scenario_allocate_tensor, scenario_split_group,
              scenario_new_group_split, scenario_abort, scenario_shutdown, scenario_set_timeout,
              scenario_set_timeout_env, scenario_future_without_wait, scenario_watchdog]}
