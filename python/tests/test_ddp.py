"""zcoll's quantized all-reduce from Python (zcoll.zeropp.quantized_all_reduce, its residual
buffer, torch.ops.zcoll.quantized_all_reduce) and as DDP's communication hook
(zcoll.ddp.quantized_allreduce_hook), on 2 ranks emulating 2 nodes (ZCOLL_HOSTID), checked
against exact gloo all-reduces of the same inputs with docs/ZEROPP.md's error bound, element by
element. ZCOLL_ALGO_QUANTIZED_ALLREDUCE=qgz_then_qwz quantizes the small buckets too (zcoll runs
the exact all-reduce below 256 KiB per rank otherwise); each test asserts that the quantized
result differs from the exact one somewhere, so quantization did run."""
import os
import tempfile
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

WORLD = 2  # 2 emulated nodes of 1 rank: qgZ's one-hop layout
BLOCK = 256


def _q(bits):
    return (1 << (bits - 1)) - 1


def _g(bits):
    """docs/ZEROPP.md's G with one rank per node (F = 1/(2 qe)), nearest-even rounding."""
    f = 1 / (2 * _q(bits))
    return f + (1 + f) / (2 * _q(bits))


def _chunk_absmax(x, world, block):
    """max |x| over the quantization block holding each element: blocks start at each chunk's
    first element (chunk r = [r*C, (r+1)*C), C = numel // world); the tail (exact) gets 0."""
    c = x.numel() // world
    out = torch.zeros_like(x)
    for r in range(world):
        chunk = x[r * c:(r + 1) * c].abs()
        pad = (-c) % block
        blocks = torch.cat([chunk, chunk.new_zeros(pad)]).view(-1, block).max(dim=1).values
        out[r * c:(r + 1) * c] = blocks.repeat_interleave(block)[:c]
    return out


def _within_bound(out, inputs, bits, avg=True):
    """|out - exact| <= (G + 2^-15) sum_s A_s + 2^-10 |exact| (divided by W for Avg) plus two
    units in the last place of out's dtype, element by element; exact = the fp64 sum."""
    xs = [x.double() for x in inputs]
    exact = sum(xs)
    sum_a = sum(_chunk_absmax(x, WORLD, BLOCK) for x in xs)
    div = len(xs) if avg else 1
    eps = torch.finfo(out.dtype).eps
    bound = ((_g(bits) + 2 ** -15) * sum_a + 2 ** -10 * exact.abs()) / div
    bound = bound + 2 * eps * out.double().abs() + 1e-30
    return bool(torch.all((out.double() - exact / div).abs() <= bound))


def _gather(t, gloo):
    everyone = [torch.empty_like(t) for _ in range(WORLD)]
    dist.all_gather(everyone, t.contiguous(), group=gloo)
    return everyone


def _bits_equal(a, b):
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _same_on_every_rank(t, gloo):
    return all(_bits_equal(e, t) for e in _gather(t, gloo))


def _input(rank, n, dtype=torch.float32, salt=0):
    g = torch.Generator().manual_seed(7919 * rank + salt)
    return (torch.randn(n, generator=g) * (1 + rank)).to(dtype)


# ---- zcoll.zeropp.quantized_all_reduce and torch.ops.zcoll.quantized_all_reduce --------------

def scenario_functions(rank, gloo):
    import zcoll.zeropp as zpp
    n = 3001  # a tail of 1 element, blocks not filling the chunks
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = _input(rank, n, dtype, 1)
        inputs = _gather(x, gloo)
        for bits, op, avg in ((8, dist.ReduceOp.AVG, True), (4, dist.ReduceOp.SUM, False)):
            out = x.clone()
            zpp.quantized_all_reduce(out, op=op, bits=bits, intra_bits=bits)
            assert _within_bound(out, inputs, bits, avg), (dtype, bits)
            assert _same_on_every_rank(out, gloo)
            exact = x.clone()
            dist.all_reduce(exact, op=op, group=gloo)
            assert not torch.equal(out, exact), "quantization did not run"

    # PREMUL_SUM (FSDP2's divide factor): each input times 0.5, then the sum; on 2 ranks the
    # halving is exact at every step, so it is AVG's bits
    x = _input(rank, n, torch.float32, 5)
    premul, avg = x.clone(), x.clone()
    zpp.quantized_all_reduce(premul, op=dist._make_nccl_premul_sum(0.5))
    zpp.quantized_all_reduce(avg, op=dist.ReduceOp.AVG)
    assert _bits_equal(premul, avg) and not torch.equal(premul, x)

    # error feedback: the buffer's size is the C call's, 4*C*(W+1) on one rank per node
    x = _input(rank, n, torch.float32, 2)
    c = n // WORLD
    assert zpp.residual_size(n) == 4 * c * (WORLD + 1)
    res = zpp.new_residual(x)
    assert res.dtype == torch.uint8 and res.numel() == 4 * c * (WORLD + 1)
    assert not res.any()
    f32 = zpp.new_residual(x, dtype=torch.float32, bits=4)
    assert f32.dtype == torch.float32 and f32.numel() == c * (WORLD + 1)
    # The first call adds a zero residual: the output of the call without feedback.
    plain, fed = x.clone(), x.clone()
    zpp.quantized_all_reduce(plain, bits=4)
    zpp.quantized_all_reduce(fed, bits=4, residual=f32)
    assert _bits_equal(plain, fed) and f32.any()
    # K calls on the same input: the mean's error shrinks like 1/K with feedback
    # (docs/ZEROPP.md: K |mean_K - exact| <= 2 G sum_s A_s), and does not without it.
    inputs = _gather(x, gloo)
    exact = sum(i.double() for i in inputs)
    sum_a = sum(_chunk_absmax(i.double(), WORLD, BLOCK) for i in inputs)
    k = 16
    for residual in (torch.zeros_like(f32), None):
        total = torch.zeros(n, dtype=torch.float64)
        for _ in range(k):
            out = x.clone()
            work = zpp.quantized_all_reduce(out, bits=4, residual=residual, async_op=True)
            work.wait()
            total += out.double()
        err = (total / k - exact).abs() * k
        within = bool(torch.all(err <= 2 * _g(4) * sum_a + 2 ** -10 * k * exact.abs() + 1e-6))
        assert within == (residual is not None), "feedback" if residual is not None else "none"


def scenario_torch_ops(rank, gloo):
    import zcoll.zeropp as zpp
    wait = torch.ops._c10d_functional.wait_tensor
    name = dist.group.WORLD.group_name
    x = _input(rank, 4096, torch.float32, 3).view(64, 64)
    before = x.clone()
    got = wait(torch.ops.zcoll.quantized_all_reduce(x, name, "avg", bits=8, intra_bits=8))
    assert got.shape == x.shape and torch.equal(x, before)  # functional: input untouched
    want = x.clone()
    zpp.quantized_all_reduce(want, op=dist.ReduceOp.AVG, bits=8, intra_bits=8)
    assert _bits_equal(got, want)
    exact = x.clone()
    dist.all_reduce(exact, op=dist.ReduceOp.AVG, group=gloo)
    assert not torch.equal(got, exact)
    got = wait(torch.ops.zcoll.quantized_all_reduce(x, name, bits=4, block_size=64))
    want = x.clone()
    zpp.quantized_all_reduce(want, bits=4, block_size=64)
    assert _bits_equal(got, want)
    # the fake (meta) implementation gives the shape to torch.compile
    meta = torch.ops.zcoll.quantized_all_reduce(torch.empty(3, 5, device="meta"), name)
    assert meta.shape == (3, 5) and meta.device.type == "meta"
    with pytest.raises(ValueError, match="reduce_op must be 'sum' or 'avg'"):
        torch.ops.zcoll.quantized_all_reduce(x, name, "max")
    with pytest.raises(ValueError, match="bits=3 is not 4 or 8"):
        torch.ops.zcoll.quantized_all_reduce(x, name, bits=3)


def scenario_errors(rank, gloo):
    import zcoll.ddp
    import zcoll.zeropp as zpp
    x = torch.ones(1024)
    with pytest.raises(ValueError, match="bits=3 is not 4 or 8"):
        zpp.quantized_all_reduce(x, bits=3)
    with pytest.raises(ValueError, match="intra_bits=12 is not 4, 8 or 16"):
        zpp.quantized_all_reduce(x, intra_bits=12)
    with pytest.raises(ValueError, match="takes ReduceOp.SUM, AVG or PREMUL_SUM, got ReduceOp.MAX"):
        zpp.quantized_all_reduce(x, op=dist.ReduceOp.MAX)
    with pytest.raises(TypeError, match="quantizes torch.float32.*got torch.int32"):
        zpp.quantized_all_reduce(torch.ones(1024, dtype=torch.int32))
    with pytest.raises(TypeError, match="quantizes torch.float32.*got torch.float64"):
        zpp.residual_size(1024, torch.float64)
    with pytest.raises(ValueError, match="zcoll backend"):
        zpp.quantized_all_reduce(x, group=gloo)
    want = zpp.residual_size(x.numel())
    with pytest.raises(ValueError, match=f"residual has {want + 4} bytes.*needs {want}"):
        zpp.quantized_all_reduce(x, residual=torch.zeros(want + 4, dtype=torch.uint8))
    with pytest.raises(TypeError, match="residual must be a torch.uint8 or torch.float32"):
        zpp.quantized_all_reduce(x, residual=torch.zeros(want // 2, dtype=torch.float16))
    with pytest.raises(ValueError, match="residual must be contiguous"):
        zpp.quantized_all_reduce(x, residual=torch.zeros(2 * want, dtype=torch.uint8)[::2])
    with pytest.raises(TypeError, match="torch.uint8 or torch.float32"):
        zpp.new_residual(x, dtype=torch.int64)
    for bad in ({"bits": 3}, {"intra_bits": 2}, {"start_iter": -1}, {"min_bucket_bytes": 1.5}):
        key = next(iter(bad))
        with pytest.raises(ValueError, match=f"{key}="):
            zcoll.ddp.QuantizedAllReduceState(**bad)
    # nothing was written, and the group still works
    assert torch.equal(x, torch.ones(1024))
    x = _input(rank, 1024)
    out = x.clone()
    zpp.quantized_all_reduce(out)
    assert _within_bound(out, _gather(x, gloo), 8, avg=False)


# ---- DDP ------------------------------------------------------------------------------------

STEPS = 5


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(),
                         nn.Linear(128, 4))


def _batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 64, generator=g), torch.randn(16, 4, generator=g)


def _ddp(**kw):
    # 40 KB buckets: 3 buckets after DDP rebuilds them (the 128x128 layer is one alone).
    return DDP(_model(), bucket_cap_mb=0.04, **kw)


def _backward(model, rank, step):
    x, y = _batch(rank, step)
    nn.functional.mse_loss(model(x), y).backward()


class RecordingHook:
    """quantized_allreduce_hook, keeping each quantized bucket's inputs on every rank (through
    gloo) and its result, to check them against the exact mean after backward."""

    def __init__(self, gloo):
        self.gloo = gloo
        self.quantized = []  # (iter, bucket index, inputs of every rank, result)
        self.exact = []      # (iter, bucket index)

    def hook(self, state, bucket):  # registered as a bound method: DDP reads its __qualname__
        import zcoll.ddp
        it, index = state.iter, bucket.index()
        if not state.quantizes(bucket.buffer()):
            self.exact.append((it, index))
            return zcoll.ddp.quantized_allreduce_hook(state, bucket)
        inputs = _gather(bucket.buffer(), self.gloo)
        record = [it, index, inputs, None]
        self.quantized.append(record)

        def keep(fut):
            record[3] = fut.value().clone()
            return fut.value()
        return zcoll.ddp.quantized_allreduce_hook(state, bucket).then(keep)


def _step(model, opt, rank, step):
    opt.zero_grad()
    _backward(model, rank, step)
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    return grads


def scenario_ddp_train(rank, gloo):
    """(a) warm-up: grads bit-identical to DDP's own all-reduce; (b) after it: each bucket within
    the bound of the exact mean, identical parameters on every rank; (c) residuals."""
    import zcoll.ddp
    import zcoll.zeropp as zpp
    for error_feedback in (False, True):
        hooked = _ddp()
        state = zcoll.ddp.QuantizedAllReduceState(start_iter=2, error_feedback=error_feedback)
        hook = RecordingHook(gloo)
        hooked.register_comm_hook(state, hook.hook)
        opt = torch.optim.SGD(hooked.parameters(), lr=0.1)
        ref_model = _ddp()
        ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
        for step in range(STEPS):
            got = _step(hooked, opt, rank, step)
            want = _step(ref_model, ref_opt, rank, step)
            if step < 2:  # (a) warm-up: the exact all-reduce, DDP's bits
                assert all(_bits_equal(g, w) for g, w in zip(got, want)), step
            for p in hooked.parameters():  # (b) identical replicas
                assert _same_on_every_rank(p.detach(), gloo), step
        assert state.iter == STEPS
        assert {it for it, _ in hook.exact} == {0, 1}
        assert {it for it, *_ in hook.quantized} == {2, 3, 4}
        indices = {index for _, index, *_ in hook.quantized}
        assert len(indices) >= 2, indices  # more than one bucket
        differs = False
        for it, index, inputs, out in hook.quantized:
            exact = sum(i.double() for i in inputs) / WORLD
            differs = differs or not torch.equal(out.double(), exact)
            if not error_feedback or it == 2:  # the first quantized step has zero residuals
                assert _within_bound(out, inputs, 8), (it, index)
        assert differs, "quantization did not run"
        if error_feedback:  # (c) one residual per bucket, of the size the C call asks
            assert set(state.residuals) == indices
            sizes = {index: inputs[0].numel() for _, index, inputs, _ in hook.quantized}
            for index, residual in state.residuals.items():
                assert residual.dtype == torch.float32 and residual.is_contiguous()
                assert residual.numel() * 4 == zpp.residual_size(sizes[index])
                c = sizes[index] // WORLD
                assert residual.numel() == c * (WORLD + 1)
                assert residual.any()
        else:
            assert state.residuals == {}


def scenario_ddp_no_sync_static(rank, gloo):
    """(d) gradient accumulation under no_sync counts iterations right; (e) static_graph=True;
    min_bucket_bytes sends small buckets through the exact all-reduce."""
    import zcoll.ddp
    for static_graph in (False, True):
        model = _ddp(static_graph=static_graph)
        state = zcoll.ddp.QuantizedAllReduceState(start_iter=1, error_feedback=False)
        hook = RecordingHook(gloo)
        model.register_comm_hook(state, hook.hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        # One synchronized step first: DDP with static_graph=True fails a no_sync backward
        # before it (torch's own assert, with or without a hook).
        _step(model, opt, rank, 0)
        assert state.iter == 1
        step = 1
        for it in range(1, 3):
            opt.zero_grad()
            with model.no_sync():  # two micro-batches accumulate locally: no hook runs
                for _ in range(2):
                    _backward(model, rank, step)
                    step += 1
            assert state.iter == it
            local = [p.grad.clone() for p in model.parameters()]
            _backward(model, rank, step)
            step += 1
            assert state.iter == it + 1, static_graph
            assert any(not torch.equal(p.grad, g) for p, g in zip(model.parameters(), local))
            opt.step()
            for p in model.parameters():
                assert _same_on_every_rank(p.detach(), gloo)
        assert {it for it, _ in hook.exact} == {0}
        assert {it for it, *_ in hook.quantized} == {1, 2}
        for it, index, inputs, out in hook.quantized:
            assert _within_bound(out, inputs, 8), (static_graph, it, index)
        assert any(not torch.equal(out.double(), sum(i.double() for i in inputs) / WORLD)
                   for *_, inputs, out in hook.quantized)

    # buckets below min_bucket_bytes run the exact all-reduce: here every one of them
    model = _ddp()
    state = zcoll.ddp.QuantizedAllReduceState(start_iter=0, min_bucket_bytes=1 << 30)
    hook = RecordingHook(gloo)
    model.register_comm_hook(state, hook.hook)
    ref = _ddp()
    for step in range(2):
        _backward(model, rank, step)
        _backward(ref, rank, step)
        assert all(_bits_equal(p.grad, q.grad) for p, q in zip(model.parameters(),
                                                                ref.parameters()))
    assert hook.quantized == [] and state.residuals == {} and state.iter == 2


# ---- HSDP: FSDP2 on the shard dimension, the replicate all-reduce quantized ----------------

def _hsdp_train(model, rank, steps=3):
    """The local shards' change over `steps` SGD steps."""
    before = {n: p.to_local().detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x, y = _batch(rank, step)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {n: p.to_local().detach() - before[n] for n, p in model.named_parameters()}


def scenario_hsdp(rank, gloo):
    """4 ranks, 2 emulated nodes of 2: replicate across the nodes, shard within each."""
    import zcoll.fsdp as zf
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    rails = [dist.new_group(r, backend="gloo") for r in ([0, 2], [1, 3])]
    rail = rails[rank % 2]
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))

    def wrap(mesh_):
        model = _model()
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh_)
        return fully_shard(model, mesh=mesh_)

    native = _hsdp_train(wrap(mesh), rank)  # torch's HSDP: the exact replicate all-reduce
    model = wrap(mesh["shard"])
    hooks = zf.quantized_replicate_all_reduce(model, mesh["replicate"].get_group())
    got = _hsdp_train(model, rank)
    # the root (first) holds no parameter of its own: its hook never runs
    assert [h.calls for h in hooks] == [0, 3, 3, 3]
    assert all(h.residual is not None and h.residual.any() for h in hooks if h._made_for)
    differs = False
    for name, p in got.items():  # p: the update of this rank's shard
        assert _same_on_every_rank_of(p, rail), name  # both replicas: the same bits
        scale = native[name].abs().max().item()
        assert scale > 0 and torch.allclose(p, native[name], rtol=0, atol=0.05 * scale), name
        differs = differs or not torch.equal(p, native[name])
    assert differs, "quantization did not run"
    with pytest.raises(ValueError, match="2-D \\(HSDP\\) mesh"):
        zf.quantized_replicate_all_reduce(wrap(mesh), mesh["replicate"].get_group())
    with pytest.raises(ValueError, match="bits=3 is not 4 or 8"):
        zf.quantized_replicate_all_reduce(model, mesh["replicate"].get_group(), bits=3)


def _same_on_every_rank_of(t, group):
    everyone = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(everyone, t.contiguous(), group=group)
    return all(_bits_equal(e, t) for e in everyone)


SCENARIOS = {f.__name__[len("scenario_"):]: f for f in
             [scenario_functions, scenario_torch_ops, scenario_errors, scenario_ddp_train,
              scenario_ddp_no_sync_static, scenario_hsdp]}


def _worker(rank, path, scenario, world, ranks_per_node):
    import zcoll  # noqa: F401
    torch.set_num_threads(1)
    os.environ["ZCOLL_HOSTID"] = f"node{rank // ranks_per_node}"
    os.environ["ZCOLL_ALGO_QUANTIZED_ALLREDUCE"] = "qgz_then_qwz"
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    try:
        SCENARIOS[scenario](rank, dist.new_group(backend="gloo"))
    finally:
        dist.destroy_process_group()


def _run(scenario, world=WORLD, ranks_per_node=1):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(os.path.join(d, "store"), scenario, world,
                                          ranks_per_node),
                           nprocs=world, join=True, start_method="fork")


def test_quantized_all_reduce_within_bound_identical_bits_error_feedback():
    _run("functions")


def test_quantized_all_reduce_torch_op_equals_zeropp():
    _run("torch_ops")


def test_quantized_all_reduce_and_hook_state_bad_input():
    _run("errors")


def test_ddp_hook_warm_up_exact_then_within_bound_identical_replicas_residuals():
    _run("ddp_train")


def test_ddp_hook_no_sync_static_graph_min_bucket_bytes():
    _run("ddp_no_sync_static")


def test_hsdp_replicate_all_reduce_quantized_4_ranks_2_nodes():
    _run("hsdp", world=4, ranks_per_node=2)
