"""Multi-process checks of the zcoll torch.distributed backend against gloo on the same inputs."""
import os
import tempfile
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64]


def _values(rank, n, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return (torch.randint(-8, 9, (n,), generator=g)).to(dtype)
    return torch.randint(0, 4, (n,), generator=g).to(dtype)


def _ops_for(dtype):
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT]
    if dtype.is_floating_point:
        ops.append(dist.ReduceOp.AVG)
    return ops


def _both(fn):
    """Runs fn(group) on zcoll's default group and on a gloo group; returns both results."""
    return fn(None), fn(_both.gloo)


def _worker(rank, world, path, scenario):
    import zcoll  # noqa: F401  (also loaded by the entry point)
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    _both.gloo = dist.new_group(backend="gloo")
    SCENARIOS[scenario](rank, world)
    dist.destroy_process_group()


def scenario_collectives(rank, world):
    n = 6 * world
    for dtype in DTYPES:
        for op in _ops_for(dtype):
            def allreduce(g):
                t = _values(rank, n, dtype)
                dist.all_reduce(t, op=op, group=g)
                return t
            a, b = _both(allreduce)
            assert torch.equal(a, b), (dtype, op)

            def rs(g):
                out = torch.empty(6, dtype=dtype)
                dist.reduce_scatter_tensor(out, _values(rank, n, dtype, 1), op=op, group=g)
                return out
            a, b = _both(rs)
            assert torch.equal(a, b), (dtype, op)

        def agt(g):
            out = torch.empty(n, dtype=dtype)
            dist.all_gather_into_tensor(out, _values(rank, 6, dtype, 2), group=g)
            return out
        a, b = _both(agt)
        assert torch.equal(a, b), dtype

        def agl(g):
            outs = [torch.empty(3, 2, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, _values(rank, 6, dtype, 3).view(3, 2), group=g)
            return torch.stack(outs)
        a, b = _both(agl)
        assert torch.equal(a, b), dtype

        def bc(g):
            t = _values(rank, n, dtype, 4)
            dist.broadcast(t, src=world - 1, group=g)
            return t
        a, b = _both(bc)
        assert torch.equal(a, b), dtype

        def a2a(g):
            out = torch.empty(n, dtype=dtype)
            dist.all_to_all_single(out, _values(rank, n, dtype, 5), group=g)
            return out
        a, b = _both(a2a)
        assert torch.equal(a, b), dtype

        root = world - 1
        for op in _ops_for(dtype):
            def red(g):
                t = _values(rank, n, dtype, 12)
                dist.reduce(t, dst=root, op=op, group=g)
                return t
            a, b = _both(red)
            if rank == root:
                assert torch.equal(a, b), ("reduce", dtype, op)

        def gat(g):
            outs = [torch.empty(3, 2, dtype=dtype) for _ in range(world)] if rank == 0 else None
            dist.gather(_values(rank, 6, dtype, 13).view(3, 2), outs, dst=0, group=g)
            return torch.stack(outs) if rank == 0 else None
        a, b = _both(gat)
        if rank == 0:
            assert torch.equal(a, b), ("gather", dtype)

        def sca(g):
            out = torch.empty(2, 3, dtype=dtype)
            ins = [_values(p, 6, dtype, 14).view(2, 3) for p in range(world)] if rank == root else None
            dist.scatter(out, ins, src=root, group=g)
            return out
        a, b = _both(sca)
        assert torch.equal(a, b), ("scatter", dtype)

        def a2al(g):
            outs = [torch.empty(3, dtype=dtype) for _ in range(world)]
            dist.all_to_all(outs, [_values(rank, 3, dtype, 15 + p) for p in range(world)], group=g)
            return torch.cat(outs)
        # Against the values themselves: torch 2.11's gloo has no all_to_all.
        expected = torch.cat([_values(p, 3, dtype, 15 + rank) for p in range(world)])
        assert torch.equal(a2al(None), expected), ("all_to_all", dtype)
        # uneven lists (gloo has none): rank r sends (r + 2p) % 3 elements to p, empty included
        ins = [_values(rank, (rank + 2 * p) % 3, dtype, 15 + p) for p in range(world)]
        outs = [torch.full(((p + 2 * rank) % 3,), 7, dtype=dtype) for p in range(world)]
        dist.all_to_all(outs, ins)
        for p in range(world):
            assert torch.equal(outs[p], _values(p, (p + 2 * rank) % 3, dtype, 15 + rank)), (dtype, p)

    # uneven all_to_all_single: rank r sends (r + p + 1) rows to p
    ins = [r + rank + 1 for r in range(world)]
    outs = [rank + p + 1 for p in range(world)]

    def a2av(g):
        inp = _values(rank, sum(ins) * 2, torch.float32, 6).view(-1, 2)
        out = torch.empty(sum(outs), 2)
        dist.all_to_all_single(out, inp, outs, ins, group=g)
        return out
    a, b = _both(a2av)
    assert torch.equal(a, b)

    def rsl(g):
        out = torch.empty(4)
        dist.reduce_scatter(out, [_values(rank, 4, torch.float32, 7 + p) for p in range(world)],
                            group=g)
        return out
    a, b = _both(rsl)
    assert torch.equal(a, b)

    # non-contiguous tensor: a transposed view is reduced in place
    def nc(g):
        t = _values(rank, 4 * world, torch.float32, 9).view(4, world).t()
        dist.all_reduce(t, group=g)
        return t
    a, b = _both(nc)
    assert torch.equal(a, b)

    # send / recv ring
    t = _values(rank, 8, torch.int64, 10)
    got = torch.empty(8, dtype=torch.int64)
    reqs = [dist.isend(t, (rank + 1) % world), dist.irecv(got, (rank - 1) % world)]
    for r in reqs:
        r.wait()
    assert torch.equal(got, _values((rank - 1) % world, 8, torch.int64, 10))
    dist.barrier()


def scenario_coalescing(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    # batch_isend_irecv: a ring of large messages (UCX rendezvous sizes) must not deadlock
    big = _values(rank, 1 << 20, torch.float32, 11)
    got = torch.empty(1 << 20)
    back = torch.empty(4, 3).t()  # non-contiguous receive buffer
    ops = [dist.P2POp(dist.isend, big, nxt), dist.P2POp(dist.irecv, got, prv),
           dist.P2POp(dist.isend, torch.full((3, 4), float(rank)), prv),
           dist.P2POp(dist.irecv, back, nxt)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got, _values(prv, 1 << 20, torch.float32, 11))
    assert torch.all(back == float(nxt))

    # fast-path coalescing: all_reduce, all_gather_into_tensor, reduce_scatter_tensor
    def ar(g):
        ts = [_values(rank, 5, torch.float32, 12), _values(rank, 7, torch.float32, 13).view(7, 1)]
        with dist._coalescing_manager(group=g, async_ops=True) as cm:
            for t in ts:
                dist.all_reduce(t, group=g)
        cm.wait()
        return torch.cat([t.reshape(-1) for t in ts])
    a, b = _both(ar)
    assert torch.equal(a, b)

    def ag(g):
        outs = [torch.empty(3 * world), torch.empty(5 * world, dtype=torch.int64)]
        ins = [_values(rank, 3, torch.float32, 14), _values(rank, 5, torch.int64, 15)]
        with dist._coalescing_manager(group=g):
            for o, i in zip(outs, ins):
                dist.all_gather_into_tensor(o, i, group=g)
        return torch.cat([outs[0], outs[1].float()])
    a, b = _both(ag)
    assert torch.equal(a, b)

    def rs(g):
        outs = [torch.empty(2), torch.empty(4)]
        ins = [_values(rank, 2 * world, torch.float32, 16), _values(rank, 4 * world, torch.float32, 17)]
        with dist._coalescing_manager(group=g):
            for o, i in zip(outs, ins):
                dist.reduce_scatter_tensor(o, i, group=g)
        return torch.cat(outs)
    a, b = _both(rs)
    assert torch.equal(a, b)


def scenario_async(rank, world):
    works, expected = [], []
    for i in range(5):
        t = torch.full((1000,), float(rank + i))
        works.append((dist.all_reduce(t, async_op=True), t))
        expected.append(float(sum(r + i for r in range(world))))
    fut = works[-1][0].get_future()
    for (w, t), e in zip(works, expected):
        assert w.wait(timedelta(seconds=30))
        assert w.is_completed()
        assert torch.all(t == e)
    fut.wait()
    assert fut.done()


def scenario_subgroup(rank, world):
    members = [r for r in range(world) if r % 2 == 0]
    g = dist.new_group(members, backend="zcoll")
    if rank in members:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        assert t.item() == float(sum(members))
    dist.barrier()


def scenario_bad_input(rank, world):
    with pytest.raises(TypeError, match="reductions on torch.bool"):
        dist.all_reduce(torch.zeros(4, dtype=torch.bool))
    with pytest.raises(TypeError, match="unsupported dtype torch.uint16"):
        dist.broadcast(torch.zeros(4, dtype=torch.uint16), src=0)
    with pytest.raises(ValueError, match="world_size"):
        dist.all_gather_into_tensor(torch.zeros(3), torch.zeros(2))
    # (meta tensors never reach a backend: torch's meta kernels for c10d ops return early)
    with pytest.raises(ValueError, match="world_size"):
        dist.reduce_scatter_tensor(torch.zeros(3), torch.zeros(2 * world + 1))
    with pytest.raises(ValueError, match="world_size output and world_size input"):
        dist.all_to_all([torch.zeros(2) for _ in range(world + 1)],
                        [torch.zeros(2) for _ in range(world + 1)])
    t = torch.ones(4)
    dist.all_reduce(t)  # the group still works afterwards
    assert torch.all(t == world)


def scenario_dead_peer(rank, world):
    # Every rank is done setting up its groups before one dies: gloo's full-mesh connect of the
    # others would otherwise still be talking to it (CI saw "connection closed by peer" there).
    dist.barrier(group=_both.gloo)
    if rank == world - 1:
        os._exit(0)  # dies without destroying its communicator
    t = torch.ones(1 << 10)
    work = dist.all_reduce(t, async_op=True)
    queued = dist.all_reduce(torch.ones(4), async_op=True)
    with pytest.raises(Exception, match="zcoll"):
        work.wait(timedelta(seconds=30))
    with pytest.raises(Exception):
        queued.wait(timedelta(seconds=30))
    os._exit(0)


def scenario_registered_memory(rank, world):
    import zcoll
    t = zcoll.empty_host(3, 5, dtype=torch.bfloat16)
    assert t.shape == (3, 5) and t.dtype == torch.bfloat16 and not t.any()
    assert zcoll.empty_host((2, 0)).numel() == 0
    with pytest.raises(ValueError, match="non-negative"):
        zcoll.empty_host(-1)
    with pytest.raises(TypeError, match="dtype"):
        zcoll.empty_host(4, dtype="float")
    # Sizes where zcoll reads the peers in place (all-gather from 1 MiB per rank, reduce-scatter
    # and all-reduce from 4 MiB): registered tensors give gloo's results, and so do ordinary
    # ones next to them on the other ranks.
    n = (5 << 20) // 4 + 3
    mine = zcoll.empty_host(n) if rank % 2 == 0 else torch.empty(n)
    mine.copy_(_values(rank, n, torch.float32))

    def agt(g):
        out = zcoll.empty_host(n * world)
        dist.all_gather_into_tensor(out, mine, group=g)
        return out
    a, b = _both(agt)
    assert torch.equal(a, b)

    def ar(g):
        t = zcoll.empty_host(n)
        t.copy_(mine)
        dist.all_reduce(t, group=g)
        return t
    a, b = _both(ar)
    assert torch.equal(a, b)

    def rs(g):
        big = zcoll.empty_host(n * world)
        big.copy_(_values(rank, n * world, torch.float32, 1))
        out = torch.empty(n)
        dist.reduce_scatter_tensor(out, big, group=g)
        return out
    a, b = _both(rs)
    assert torch.equal(a, b)


SCENARIOS = {f.__name__[len("scenario_"):]: f for f in
             [scenario_collectives, scenario_coalescing, scenario_async, scenario_subgroup, scenario_bad_input,
              scenario_dead_peer, scenario_registered_memory]}


def _run(scenario, world):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(world, os.path.join(d, "store"), scenario),
                           nprocs=world, join=True, start_method="fork")


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_match_gloo(world):
    _run("collectives", world)


@pytest.mark.parametrize("world", [2, 3])
def test_coalescing_and_batched_p2p(world):
    _run("coalescing", world)


def test_async_and_future():
    _run("async", 2)


def test_subgroup():
    _run("subgroup", 3)


def test_bad_input_raises_with_message():
    _run("bad_input", 2)


def test_dead_peer_fails_pending_works():
    _run("dead_peer", 3)


@pytest.mark.parametrize("world", [2, 3])
def test_registered_host_memory(world):
    _run("registered_memory", world)
