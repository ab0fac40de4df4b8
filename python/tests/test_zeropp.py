"""The ZeRO++ collectives from Python (zcoll.zeropp) and as torch ops (torch.ops.zcoll), on 4
ranks emulating 2 nodes (ZCOLL_HOSTID), checked against exact gloo collectives on the same inputs
with the error bounds of docs/ZEROPP.md, element by element."""
import os
import tempfile
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

WORLD, LOCAL = 4, 2  # 2 emulated nodes of 2 ranks
FLOAT_TYPES = [torch.float32, torch.float16, torch.bfloat16]


def _shard(rank, n, dtype, salt=0):
    g = torch.Generator().manual_seed(7919 * rank + salt)
    return (torch.randn(n, generator=g) * (1 + rank)).to(dtype)


def _block_absmax(x, block):
    """max |x| per block of `block` elements (blocks start at element 0), broadcast back."""
    n = x.numel()
    pad = (-n) % block
    xp = torch.cat([x.abs(), x.new_zeros(pad)]).view(-1, block)
    return xp.max(dim=1).values.repeat_interleave(block)[:n]


def _ulp(x, dtype):
    return torch.finfo(dtype).eps * x.abs().clamp_min(torch.finfo(dtype).tiny)


def _check_qwz(gathered, shards, dtype, bits, block):
    """docs/ZEROPP.md qwZ bound: |x - x'| <= scale/2 + the output dtype's rounding."""
    qmax = (1 << (bits - 1)) - 1
    for r, s in enumerate(shards):
        x = s.double()
        got = gathered[r * s.numel():(r + 1) * s.numel()].double()
        scale = _block_absmax(x, block) / qmax
        bound = scale * (0.5 + 2 ** -15) + _ulp(got, dtype) + 1e-30
        assert torch.all((got - x).abs() <= bound), (r, dtype, bits)


def _worker(rank, path, scenario):
    import zcoll  # noqa: F401
    os.environ["ZCOLL_HOSTID"] = f"node{rank // LOCAL}"
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    SCENARIOS[scenario](rank, gloo)
    dist.destroy_process_group()


def _all_shards(rank, n, dtype, salt, gloo):
    shards = [torch.empty(n, dtype=dtype) for _ in range(WORLD)]
    dist.all_gather(shards, _shard(rank, n, dtype, salt), group=gloo)
    return shards


def _same_on_every_rank(t, gloo):
    everyone = [torch.empty_like(t) for _ in range(WORLD)]
    dist.all_gather(everyone, t, group=gloo)
    return all(torch.equal(e.view(torch.uint8) if e.is_floating_point() else e,
                           t.view(torch.uint8) if t.is_floating_point() else t) for e in everyone)


def scenario_functions(rank, gloo):
    import zcoll.zeropp as zpp
    n = 1000  # not a multiple of the block
    for dtype in FLOAT_TYPES:
        shards = _all_shards(rank, n, dtype, 1, gloo)
        for bits in (8, 4):
            out = torch.empty(WORLD * n, dtype=dtype)
            zpp.quantized_all_gather(out, shards[rank], bits=bits, block_size=64)
            _check_qwz(out, shards, dtype, bits, 64)
            assert _same_on_every_rank(out, gloo)

        # hpZ: exact when unquantized; the backward gather reproduces the forward output
        exact = torch.cat(shards)
        sec = torch.empty(zpp.secondary_shard_numel(n), dtype=dtype)
        assert sec.numel() == 2 * n
        out = torch.empty(WORLD * n, dtype=dtype)
        zpp.all_gather_hier(out, shards[rank], sec, quantized=False)
        assert torch.equal(out, exact)
        back = torch.empty_like(out)
        zpp.all_gather_from_secondary(back, sec)
        assert torch.equal(back, exact)
        work = zpp.all_gather_hier(out, shards[rank], sec, bits=8, async_op=True)
        work.wait()
        _check_qwz(out, shards, dtype, 8, 256)
        zpp.all_gather_from_secondary(back, sec)
        assert torch.equal(back.view(torch.uint8), out.view(torch.uint8))

        # qgZ against the exact fp64 sum, docs/ZEROPP.md bound (INT4 both hops: F = 0.148)
        full = [_shard(r, WORLD * n, dtype, 2) for r in range(WORLD)]
        for op, div in ((dist.ReduceOp.SUM, 1), (dist.ReduceOp.AVG, WORLD)):
            out = torch.empty(n, dtype=dtype)
            zpp.quantized_reduce_scatter(out, full[rank], op=op, block_size=128)
            chunks = [f[rank * n:(rank + 1) * n].double() for f in full]
            exact = sum(chunks)
            sum_a = sum(_block_absmax(c, 128) for c in chunks)
            f = 1 / 14 + (1 + 1 / 14) / 14
            bound = (f * sum_a + 2 ** -16 * sum_a) / div + 2 ** -10 * exact.abs() / div
            bound = bound + _ulp(out.double(), dtype) + 1e-30
            assert torch.all((out.double() - exact / div).abs() <= bound), (dtype, op)


def scenario_torch_ops(rank, gloo):
    wait = torch.ops._c10d_functional.wait_tensor
    name = dist.group.WORLD.group_name
    n = 512
    shards = _all_shards(rank, n, torch.float32, 3, gloo)
    out = wait(torch.ops.zcoll.quantized_all_gather(shards[rank].view(8, 64), name, bits=8))
    assert out.shape == (WORLD * 8, 64)
    _check_qwz(out.reshape(-1), shards, torch.float32, 8, 256)

    out, sec = torch.ops.zcoll.all_gather_hier(shards[rank], name, quantized=False)
    wait(out)
    assert torch.equal(out, torch.cat(shards)) and sec.numel() == 2 * n
    back = wait(torch.ops.zcoll.all_gather_from_secondary(sec, name))
    assert torch.equal(back, out)

    full = _shard(rank, WORLD * n, torch.float32, 4).view(WORLD * 4, -1)
    got = wait(torch.ops.zcoll.quantized_reduce_scatter(full, name, "avg", bits=8, intra_bits=8))
    assert got.shape == (4, full.shape[1])
    exact = torch.empty(4, full.shape[1])
    dist.reduce_scatter_tensor(exact, full, op=dist.ReduceOp.AVG, group=gloo)
    assert torch.allclose(got, exact, atol=0.05 * full.abs().max().item())

    with pytest.raises(ValueError, match="divisible"):
        torch.ops.zcoll.quantized_reduce_scatter(torch.ones(WORLD + 1), name)
    with pytest.raises(ValueError, match="reduce_op"):
        torch.ops.zcoll.quantized_reduce_scatter(torch.ones(WORLD), name, "max")


def scenario_errors(rank, gloo):
    import zcoll.zeropp as zpp
    with pytest.raises(ValueError, match="zcoll backend"):
        zpp.quantized_all_gather(torch.empty(8), torch.empty(2), group=gloo)
    with pytest.raises(Exception, match="world_size"):
        zpp.quantized_all_gather(torch.empty(7), torch.empty(2))
    with pytest.raises(Exception, match="nodes"):
        zpp.all_gather_hier(torch.empty(8), torch.empty(2), torch.empty(3))
    # int32 cannot be quantized: a TypeError naming torch's dtypes, before anything runs
    with pytest.raises(TypeError, match="quantizes torch.float32.*got torch.int32"):
        zpp.quantized_all_gather(torch.empty(8, dtype=torch.int32), torch.empty(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="block_size=33"):
        zpp.quantized_all_gather(torch.empty(8), torch.empty(2), block_size=33)


SCENARIOS = {f.__name__[len("scenario_"):]: f for f in
             [scenario_functions, scenario_torch_ops, scenario_errors]}


def _run(scenario):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(os.path.join(d, "store"), scenario), nprocs=WORLD,
                           join=True, start_method="fork")


def test_zeropp_functions_within_documented_bounds():
    _run("functions")


def test_zeropp_torch_ops_and_wait_tensor():
    _run("torch_ops")


def test_zeropp_bad_input_raises_with_message():
    _run("errors")
