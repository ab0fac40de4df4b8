"""CUDA tensors through the zcoll backend: every operation gives on the GPU exactly what it gives
on the CPU for the same inputs (the same zcoll algorithms, the CUDA kernels promise the CPU
kernels' bits), with NCCL's stream semantics: the call returns once enqueued on the caller's
stream, Work.wait() orders the current stream after it, and get_future() completes on it.

Ranks are spawned processes sharing the machine's GPU(s). Skipped, saying exactly why, without a
GPU, with a torch or an extension or a libzcoll built without CUDA, or with a torch outside the
range zcoll supports.
"""
import os
import subprocess
import sys
import tempfile
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")


# Asked in a child process (initialising CUDA here would break forked ranks elsewhere): "" when
# the CUDA tests can run, else exactly why not.
_PROBE = r"""
import sys
import torch
try:
    import zcoll._C as C
except ImportError as err:
    if "found torch" in str(err):
        sys.exit(f"torch {torch.__version__} is outside the range zcoll supports: {err}")
    if "_C" in str(err):
        sys.exit(f"zcoll's torch extension (zcoll._C) is not built for this python and torch "
                 f"{torch.__version__} (pip install --no-build-isolation ./python): {err}")
    sys.exit(f"zcoll cannot be imported: {err}")
if torch.version.cuda is None:
    sys.exit(f"torch {torch.__version__} is a build without CUDA")
if not C.built_with_cuda:
    sys.exit("zcoll's torch extension was built without CUDA (no CUDA toolkit at build time, or "
             "ZCOLL_TORCH_CUDA=0): rebuild it (pip install --no-build-isolation ./python)")
if not torch.cuda.is_available():
    try:
        torch.cuda.init()
        why = "no error from torch.cuda.init()"
    except Exception as err:  # the driver's own words
        why = f"{type(err).__name__}: {err}"
    sys.exit(f"no CUDA device: torch.cuda.is_available() is False ({why})")
if not C.zcoll_takes_device_buffers():
    sys.exit("libzcoll.so bundled with the extension was built without CUDA (ZCOLL_WITH_CUDA=OFF, "
             "or no nvcc at configure time): no device buffers")
"""


def _cuda_skip_reason():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True)
    if out.returncode == 0:
        return ""
    lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"the CUDA probe exited {out.returncode} without a reason"


_SKIP_REASON = _cuda_skip_reason()
pytestmark = pytest.mark.skipif(bool(_SKIP_REASON), reason=_SKIP_REASON or "runs")


def _values(rank, n, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randint(-8, 9, (n,), generator=g).to(dtype)
    return torch.randint(0, 4, (n,), generator=g).to(dtype)


def _on_both(fn):
    """fn(device) on CPU tensors and on CUDA tensors; the CUDA result copied back."""
    cpu = fn("cpu")
    gpu = fn("cuda")
    torch.cuda.current_stream().synchronize()
    return cpu, gpu.cpu()


def _worker(rank, world, path, scenario, order="set_device_first"):
    import zcoll  # noqa: F401
    dev = rank % torch.cuda.device_count()
    kwargs = {}
    if order == "set_device_first":
        torch.cuda.set_device(dev)
    elif order == "device_id":
        kwargs["device_id"] = torch.device("cuda", dev)  # connects at init (eager)
    else:  # "init_first": DeepSpeed's order
        torch.cuda.init()
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60), **kwargs)
    if order == "init_first":
        torch.cuda.set_device(dev)
    SCENARIOS[scenario](rank, world)
    dist.destroy_process_group()


def scenario_collectives(rank, world):
    n = 6 * world
    for dtype in [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64]:
        for op in [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT]:
            def allreduce(dev):
                t = _values(rank, n, dtype).to(dev)
                dist.all_reduce(t, op=op)
                return t
            a, b = _on_both(allreduce)
            assert torch.equal(a, b), (dtype, op)

            def rs(dev):
                out = torch.empty(6, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(out, _values(rank, n, dtype, 1).to(dev), op=op)
                return out
            a, b = _on_both(rs)
            assert torch.equal(a, b), (dtype, op)

        def agt(dev):
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(out, _values(rank, 6, dtype, 2).to(dev))
            return out
        a, b = _on_both(agt)
        assert torch.equal(a, b), dtype

        def agl(dev):
            outs = [torch.empty(3, 2, dtype=dtype, device=dev) for _ in range(world)]
            dist.all_gather(outs, _values(rank, 6, dtype, 3).view(3, 2).to(dev))
            return torch.stack(outs)
        a, b = _on_both(agl)
        assert torch.equal(a, b), dtype

        def bc(dev):
            t = _values(rank, n, dtype, 4).to(dev)
            dist.broadcast(t, src=world - 1)
            return t
        a, b = _on_both(bc)
        assert torch.equal(a, b), dtype

        def a2a(dev):
            splits = [(rank + p) % 3 + 1 for p in range(world)]
            recv = [(p + rank) % 3 + 1 for p in range(world)]
            out = torch.empty(sum(recv), 2, dtype=dtype, device=dev)
            dist.all_to_all_single(out, _values(rank, 2 * sum(splits), dtype, 5).view(-1, 2).to(dev),
                                   output_split_sizes=recv, input_split_sizes=splits)
            return out
        a, b = _on_both(a2a)
        assert torch.equal(a, b), dtype

    def noncontiguous(dev):
        t = _values(rank, 4 * 6, torch.float32, 6).view(4, 6).to(dev).t()
        dist.all_reduce(t)
        return t
    a, b = _on_both(noncontiguous)
    assert torch.equal(a, b)

    def ring(dev):
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = torch.empty(1 << 16, device=dev)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, _values(rank, 1 << 16, torch.float32, 7).to(dev), nxt),
                                        dist.P2POp(dist.irecv, got, prv)])
        for w in works:
            w.wait()
        return got
    a, b = _on_both(ring)
    assert torch.equal(a, b)


def scenario_stream_semantics(rank, world):
    # Work queued on the caller's stream before the call is seen by it, and work queued after
    # wait() sees its result, without any host synchronization in between.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.zeros(1 << 20, device="cuda")
        torch.cuda._sleep(50_000_000)  # a long kernel before the fill
        t.fill_(float(rank + 1))
        work = dist.all_reduce(t, async_op=True)
        fut = work.get_future()
        work.wait()
        doubled = t * 2  # after the all-reduce, on the same stream
    side.synchronize()
    total = float(sum(r + 1 for r in range(world)))
    assert torch.all(doubled == 2 * total)
    fut.wait()
    assert fut.done() and torch.all(fut.value()[0] == total)
    assert work.is_completed()


def scenario_zeropp(rank, world):
    import zcoll.zeropp as zpp
    n = 512
    shard = torch.randn(n, generator=torch.Generator().manual_seed(rank)).to(torch.bfloat16)

    def qwz(dev):
        out = torch.empty(n * world, dtype=torch.bfloat16, device=dev)
        zpp.quantized_all_gather(out, shard.to(dev), bits=8, block_size=64)
        return out
    a, b = _on_both(qwz)
    assert torch.equal(a, b)

    def hpz(dev):
        out = torch.empty(n * world, dtype=torch.bfloat16, device=dev)
        sec = torch.empty(zpp.secondary_shard_numel(n), dtype=torch.bfloat16, device=dev)
        zpp.all_gather_hier(out, shard.to(dev), sec, bits=8)
        back = torch.empty_like(out)
        zpp.all_gather_from_secondary(back, sec)
        return torch.cat([out, back])
    a, b = _on_both(hpz)
    assert torch.equal(a, b)

    full = torch.randn(n * world, generator=torch.Generator().manual_seed(10 + rank))

    def qgz(dev):
        out = torch.empty(n, device=dev)
        zpp.quantized_reduce_scatter(out, full.to(dev), op=dist.ReduceOp.AVG, bits=4)
        return out
    a, b = _on_both(qgz)
    assert torch.equal(a, b)

    group = dist.distributed_c10d._get_default_group()
    out = torch.ops.zcoll.quantized_all_gather(shard.cuda(), group.group_name, bits=8)
    torch.ops._c10d_functional.wait_tensor(out)
    ref = torch.empty(n * world, dtype=torch.bfloat16)
    zpp.quantized_all_gather(ref, shard, bits=8)
    assert torch.equal(out.cpu(), ref)


def scenario_mixed_devices_refused(rank, world):
    with pytest.raises(Exception, match="one device"):
        dist.all_gather_into_tensor(torch.empty(2 * world, device="cuda"), torch.zeros(2))
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)  # the group still works afterwards
    assert torch.all(t.cpu() == world)


def scenario_init_before_set_device(rank, world):
    # DeepSpeed's order: init_process_group, then set_device (see _worker_late_device). The
    # group binds to the first CUDA tensor's device, each rank its own.
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    t = torch.full((8,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    assert torch.all(t.cpu() == sum(range(1, world + 1)))
    assert t.device == dev


def scenario_non_default_stream(rank, world):
    # FSDP2 issues from its own streams: the operation starts after what that stream holds.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.ones(1 << 20, device="cuda")
        t.mul_(rank + 1)  # queued on s before the collective
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        out = t.cpu()  # on s: after the collective (wait() made s wait for it)
    assert torch.all(out == sum(0.5 * (r + 1) for r in range(world)))


def scenario_point_to_point_first(rank, world):
    # The group's first CUDA operation on each rank is point to point (a ring of sends), a
    # barrier before it: each rank's first CUDA operation connects the group to its device.
    dist.barrier()
    out = torch.empty(8, device="cuda")
    send = torch.full((8,), float(rank), device="cuda")
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world),
           dist.P2POp(dist.irecv, out, (rank - 1) % world)]
    if rank % 2:
        ops.reverse()
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert torch.all(out.cpu() == float((rank - 1) % world))
    if rank == 0:  # then a plain send / recv pair, then a collective
        dist.send(send, 1)
    elif rank == 1:
        dist.recv(out, 0)
        assert torch.all(out.cpu() == 0.0)
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)
    assert torch.all(t.cpu() == world)


def scenario_send_recv_first(rank, world):
    # Nothing but a send and a recv as the group's first CUDA operations.
    t = torch.full((4,), float(rank + 1), device="cuda")
    if rank == 0:
        dist.send(t, 1)
    else:
        dist.recv(t, 0)
        assert torch.all(t.cpu() == 1.0)


def scenario_graph_capture_refused(rank, world):
    # zcoll's device calls cannot be captured: refused before anything is recorded on a stream,
    # so the capture ends valid and the group works afterwards (python/README.md, CUDA tensors).
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)  # connects the group outside the capture
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="captured into a CUDA graph"):
        with torch.cuda.graph(g):
            t.mul_(2)  # captured, not run
            dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.all_reduce(t)
    assert torch.all(t.cpu() == world * world)


SCENARIOS = {f.__name__[len("scenario_"):]: f for f in
             [scenario_collectives, scenario_stream_semantics, scenario_zeropp,
              scenario_mixed_devices_refused, scenario_init_before_set_device,
              scenario_non_default_stream, scenario_graph_capture_refused,
              scenario_point_to_point_first, scenario_send_recv_first]}


def _run(scenario, world, order="set_device_first"):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(world, os.path.join(d, "store"), scenario, order),
                           nprocs=world, join=True, start_method="spawn")


@pytest.mark.parametrize("world", [2, 3])
def test_cuda_collectives_match_cpu(world):
    _run("collectives", world)


def test_cuda_stream_semantics_and_future():
    _run("stream_semantics", 2)


def test_cuda_zeropp_match_cpu():
    _run("zeropp", 2)


def test_cuda_mixed_devices_refused():
    _run("mixed_devices_refused", 2)


@pytest.mark.parametrize("order", ["init_first", "device_id"])
def test_cuda_device_bound_lazily_or_by_device_id(order):
    _run("init_before_set_device", 2, order)


def test_cuda_non_default_stream_premul_sum():
    _run("non_default_stream", 2)


def test_cuda_graph_capture_refused():
    _run("graph_capture_refused", 2)


@pytest.mark.parametrize("order", ["set_device_first", "init_first"])
def test_cuda_point_to_point_as_the_first_operation(order):
    _run("send_recv_first", 2, order)
    _run("point_to_point_first", 3, order)
