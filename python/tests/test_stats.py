"""zcoll.get_stats / zcoll.reset_stats (issue 31): zcoll's byte counters (zcollCommGetStats) of a
torch process group's communicator, on the default group, a new_group and a split_group, and
the errors for groups that do not run on zcoll. 2 ranks, tiny tensors."""
import os
import tempfile
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch_features import CPU_SPLIT_GROUP

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

KEYS = ["bytes_sent_self", "bytes_sent_intra", "bytes_sent_inter",
        "bytes_recv_self", "bytes_recv_intra", "bytes_recv_inter", "op_count"]


def _worker(rank, world, path, scenario, hosts):
    import zcoll  # noqa: F401
    torch.set_num_threads(1)
    os.environ["ZCOLL_HOSTID"] = hosts[rank]
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    try:
        SCENARIOS[scenario](rank, world)
    finally:
        dist.destroy_process_group()


def _run(scenario, hosts):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(len(hosts), os.path.join(d, "store"), scenario, hosts),
                           nprocs=len(hosts), join=True, start_method="fork")


def scenario_all_reduce(rank, world):
    """An all-reduce of N float32 on 2 ranks, at the sizes of zcoll's two message-based
    algorithms (src/coll/collectives.cc defaults): recursive doubling up to 64 KiB (on 2 ranks
    one exchange of the whole vector) and the ring above (N/2 elements of partial sums, then N/2
    of results): both send and receive exactly N * 4 bytes per rank, on the path between the two
    ranks (inter-node when they are on two nodes, intra-node on one), nothing on the other paths
    (no self copy: in place); one operation."""
    import zcoll
    nodes = 2 if os.environ["ZCOLL_HOSTID"] != "same" else 1
    on, off = ("inter", "intra") if nodes == 2 else ("intra", "inter")
    for n in (1024, 32768):  # 4 KiB, 128 KiB
        zcoll.reset_stats()
        zero = zcoll.get_stats()
        assert list(zero) == KEYS and all(v == 0 for v in zero.values()), zero
        t = torch.ones(n)
        work = dist.all_reduce(t, async_op=True)
        s = zcoll.get_stats()  # waits for the all-reduce issued before it: counted in full
        assert work.is_completed()
        assert torch.equal(t, torch.full((n,), 2.0))
        print(f"rank {rank} nodes={nodes} all_reduce {n} float32: {s}")
        assert s[f"bytes_sent_{on}"] == s[f"bytes_recv_{on}"] == n * 4, s
        assert s[f"bytes_sent_{off}"] == s[f"bytes_recv_{off}"] == 0, s
        assert s["bytes_sent_self"] == s["bytes_recv_self"] == 0, s
        assert s["op_count"] == 1, s
    # counters add up across operations, and reset gives 0 again
    dist.all_reduce(t)
    s2 = zcoll.get_stats(dist.group.WORLD)
    assert s2[f"bytes_sent_{on}"] == 2 * n * 4 and s2["op_count"] == 2, s2
    zcoll.reset_stats(dist.group.WORLD)
    assert all(v == 0 for v in zcoll.get_stats().values())
    # other groups have counters of their own: a new_group and a split_group
    sub = dist.new_group([0, 1])
    split = dist.split_group(split_ranks=[[0, 1]]) if CPU_SPLIT_GROUP else None
    zcoll.reset_stats()  # split_group's zcollCommSplit exchanges a few bytes on the parent
    for g in filter(None, (sub, split)):
        zcoll.reset_stats(g)
        x = torch.ones(n)
        dist.all_reduce(x, group=g)
        sg = zcoll.get_stats(g)
        assert sg[f"bytes_sent_{on}"] == n * 4 and sg["op_count"] == 1, sg
    w = zcoll.get_stats()
    assert all(v == 0 for v in w.values()), w  # the subgroups' operations are theirs only


def scenario_errors(rank, world):
    import zcoll
    gloo = dist.new_group(backend="gloo")
    for fn in (zcoll.get_stats, zcoll.reset_stats):
        with pytest.raises(ValueError, match=rf"zcoll\.{fn.__name__} runs on a process group of "
                                             rf"the zcoll backend; this group runs on gloo"):
            fn(gloo)
    with pytest.raises(TypeError, match="takes a torch.distributed ProcessGroup"):
        zcoll.get_stats("world")
    only0 = dist.new_group([0])
    if rank == 1:
        with pytest.raises(ValueError, match="not a member of the group"):
            zcoll.get_stats(only0)
    else:
        assert zcoll.get_stats(only0)["op_count"] == 0
    dist.barrier()


SCENARIOS = {"all_reduce": scenario_all_reduce, "errors": scenario_errors}


def test_stats_all_reduce_two_nodes():
    _run("all_reduce", ("node0", "node1"))


def test_stats_all_reduce_one_node():
    _run("all_reduce", ("same", "same"))


def test_stats_errors_on_non_zcoll_groups():
    _run("errors", ("node0", "node1"))


def test_stats_without_default_group():
    import zcoll
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="default group is not initialized"):
        zcoll.get_stats()
