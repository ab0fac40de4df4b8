"""The ZeRO++ collectives as torch ops, functional style (like torch.ops._c10d_functional):

    torch.ops.zcoll.quantized_all_gather(input, group_name, bits=0, block_size=0,
                                         symmetric=True, stochastic=False, seed=0) -> Tensor
    torch.ops.zcoll.all_gather_hier(input, group_name, quantized=True, bits=0, block_size=0,
                                    symmetric=True, stochastic=False, seed=0)
        -> (Tensor output, Tensor secondary)
    torch.ops.zcoll.all_gather_from_secondary(secondary, group_name) -> Tensor
    torch.ops.zcoll.quantized_reduce_scatter(input, group_name, reduce_op="sum", bits=0,
                                             intra_bits=0, block_size=0, symmetric=True,
                                             stochastic=False, seed=0, pipeline_depth=0) -> Tensor
    torch.ops.zcoll.quantized_all_reduce(input, group_name, reduce_op="sum", bits=0,
                                         intra_bits=0, block_size=0, symmetric=True,
                                         stochastic=False, seed=0, pipeline_depth=0) -> Tensor

The group is resolved by name (``group.group_name``); settings of 0 take zcoll's defaults. Each op
returns at once with new output tensors whose operation is registered with c10d, so
``torch.ops._c10d_functional.wait_tensor(out)`` waits for it: read the outputs only after that.
Gathers concatenate along dim 0 (output shape [world_size * input.shape[0], ...]); the reduce-
scatter splits dim 0 (input.shape[0] must divide by world_size); the all-reduce returns a new
tensor of input's shape (input is not written; no error feedback: zcoll.zeropp.quantized_all_reduce
with residual= keeps it); the secondary shard is 1-D
(nodes * input.numel()). all_gather_hier's two outputs are views of one new storage, so waiting
either one (wait_tensor) waits for the operation, and nothing is left unwaited. Fake (meta) implementations give the shapes to torch.compile.
"""
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _register_work, _resolve_process_group

from . import _C, zeropp

_lib = torch.library.Library("zcoll", "DEF")
_QUANT = "int bits=0, int block_size=0, bool symmetric=True, bool stochastic=False, int seed=0"
_lib.define(f"quantized_all_gather(Tensor input, str group_name, {_QUANT}) -> Tensor")
_lib.define(f"all_gather_hier(Tensor input, str group_name, bool quantized=True, {_QUANT}) "
            "-> (Tensor, Tensor)")
_lib.define("all_gather_from_secondary(Tensor secondary, str group_name) -> Tensor")
_lib.define("quantized_reduce_scatter(Tensor input, str group_name, str reduce_op=\"sum\", "
            "int bits=0, int intra_bits=0, int block_size=0, bool symmetric=True, "
            "bool stochastic=False, int seed=0, int pipeline_depth=0) -> Tensor")
_lib.define("quantized_all_reduce(Tensor input, str group_name, str reduce_op=\"sum\", "
            "int bits=0, int intra_bits=0, int block_size=0, bool symmetric=True, "
            "bool stochastic=False, int seed=0, int pipeline_depth=0) -> Tensor")

_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG}
# The dispatch keys the ops run for: CUDA tensors too where the extension was built with CUDA.
_KEYS = ("CPU", "CUDA") if _C.built_with_cuda else ("CPU",)


def _impl(name):
    def register(fn):
        for key in _KEYS:
            _lib.impl(name, fn, key)
        return fn
    return register


def _group(name):
    return _resolve_process_group(name)


def _gathered_shape(input, size):
    if input.dim() == 0:
        return (size,)
    return (size * input.shape[0],) + tuple(input.shape[1:])


def _scattered_shape(input, size):
    if input.dim() == 0 or input.shape[0] % size:
        raise ValueError(f"zcoll: quantized_reduce_scatter needs input.shape[0] divisible by the "
                         f"group size {size} (got shape {tuple(input.shape)})")
    return (input.shape[0] // size,) + tuple(input.shape[1:])


def _in_one_storage(like, *shapes):
    """New tensors of `shapes` (like `like`), back to back in one storage: one work registered
    on it is waited, and no longer tracked, when wait_tensor is called on any of them."""
    sizes = [torch.Size(shape).numel() for shape in shapes]
    flat = like.new_empty((sum(sizes),))
    return tuple(part.view(shape) for part, shape in zip(flat.split(sizes), shapes))


def _registered(work, out):
    _register_work(out, work)
    return out


@_impl("quantized_all_gather")
def _quantized_all_gather(input, group_name, bits=0, block_size=0, symmetric=True,
                          stochastic=False, seed=0):
    pg = _group(group_name)
    out = input.new_empty(_gathered_shape(input, pg.size()))
    work = zeropp.quantized_all_gather(out, input, pg, bits=bits, block_size=block_size,
                                       symmetric=symmetric, stochastic=stochastic, seed=seed,
                                       async_op=True)
    return _registered(work, out)


@_impl("all_gather_hier")
def _all_gather_hier(input, group_name, quantized=True, bits=0, block_size=0, symmetric=True,
                     stochastic=False, seed=0):
    pg = _group(group_name)
    out, secondary = _in_one_storage(input, _gathered_shape(input, pg.size()),
                                     (zeropp.secondary_shard_numel(input.numel(), pg),))
    work = zeropp.all_gather_hier(out, input, secondary, pg, quantized=quantized, bits=bits,
                                  block_size=block_size, symmetric=symmetric,
                                  stochastic=stochastic, seed=seed, async_op=True)
    # c10d keys registered works by storage: this one covers the secondary too.
    return _registered(work, out), secondary


@_impl("all_gather_from_secondary")
def _all_gather_from_secondary(secondary, group_name):
    pg = _group(group_name)
    nodes = zeropp.zcoll_backend(pg).node_count()
    out = secondary.new_empty((secondary.numel() // nodes * pg.size(),))
    work = zeropp.all_gather_from_secondary(out, secondary, pg, async_op=True)
    return _registered(work, out)


@_impl("quantized_reduce_scatter")
def _quantized_reduce_scatter(input, group_name, reduce_op="sum", bits=0, intra_bits=0,
                              block_size=0, symmetric=True, stochastic=False, seed=0,
                              pipeline_depth=0):
    op = _reduce_op(reduce_op, "quantized_reduce_scatter")
    pg = _group(group_name)
    out = input.new_empty(_scattered_shape(input, pg.size()))
    work = zeropp.quantized_reduce_scatter(
        out, input, op, pg, bits=bits, intra_bits=intra_bits,
        block_size=block_size, symmetric=symmetric, stochastic=stochastic, seed=seed,
        pipeline_depth=pipeline_depth, async_op=True)
    return _registered(work, out)


def _reduce_op(reduce_op, what):
    if reduce_op.lower() not in _REDUCE_OPS:
        raise ValueError(f"zcoll: {what} reduce_op must be 'sum' or 'avg' (got {reduce_op!r})")
    return _REDUCE_OPS[reduce_op.lower()]


@_impl("quantized_all_reduce")
def _quantized_all_reduce(input, group_name, reduce_op="sum", bits=0, intra_bits=0,
                          block_size=0, symmetric=True, stochastic=False, seed=0,
                          pipeline_depth=0):
    op = _reduce_op(reduce_op, "quantized_all_reduce")
    pg = _group(group_name)
    out = input.clone(memory_format=torch.contiguous_format)
    work = zeropp.quantized_all_reduce(
        out, pg, op, bits=bits, intra_bits=intra_bits, block_size=block_size,
        symmetric=symmetric, stochastic=stochastic, seed=seed, pipeline_depth=pipeline_depth,
        async_op=True)
    return _registered(work, out)


@torch.library.register_fake("zcoll::quantized_all_gather")
def _quantized_all_gather_fake(input, group_name, *args, **kwargs):
    return input.new_empty(_gathered_shape(input, _group(group_name).size()))


@torch.library.register_fake("zcoll::all_gather_hier")
def _all_gather_hier_fake(input, group_name, *args, **kwargs):
    pg = _group(group_name)
    secondary = input.new_empty((zeropp.secondary_shard_numel(input.numel(), pg),))
    return input.new_empty(_gathered_shape(input, pg.size())), secondary


@torch.library.register_fake("zcoll::all_gather_from_secondary")
def _all_gather_from_secondary_fake(secondary, group_name):
    pg = _group(group_name)
    nodes = zeropp.zcoll_backend(pg).node_count()
    return secondary.new_empty((secondary.numel() // nodes * pg.size(),))


@torch.library.register_fake("zcoll::quantized_reduce_scatter")
def _quantized_reduce_scatter_fake(input, group_name, *args, **kwargs):
    return input.new_empty(_scattered_shape(input, _group(group_name).size()))


@torch.library.register_fake("zcoll::quantized_all_reduce")
def _quantized_all_reduce_fake(input, group_name, *args, **kwargs):
    return torch.empty_like(input, memory_format=torch.contiguous_format)
