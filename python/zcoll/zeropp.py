"""The ZeRO++ collectives (docs/ZEROPP.md) on zcoll process groups, torch.distributed style.

Each function takes its output tensor first (like ``all_gather_into_tensor``), runs on the
group's zcoll communicator in submission order with the group's other operations, and returns a
``Work`` when ``async_op=True`` (else waits and returns None). Quantization settings left at None
take zcoll's documented defaults (qwZ / hpZ: INT8, block 256; qgZ: INT4 both hops, block 256;
symmetric, round to nearest even).

    import zcoll.zeropp as zpp
    zpp.quantized_all_gather(full, shard)                     # qwZ
    sec = torch.empty(zpp.secondary_shard_numel(shard.numel()), dtype=shard.dtype)
    zpp.all_gather_hier(full, shard, sec)                     # hpZ forward: keeps the secondary
    zpp.all_gather_from_secondary(full, sec)                  # hpZ backward: no inter-node bytes
    zpp.quantized_reduce_scatter(grad_shard, grad, op=dist.ReduceOp.AVG)   # qgZ
"""
import torch
import torch.distributed as dist

from . import _C


def zcoll_backend(group=None, what="this ZeRO++ collective"):
    """The zcoll backend object of `group` (default: the default group); raises ValueError when
    the group does not run on zcoll (`what` names the caller in the message)."""
    if group is None:
        if not dist.is_initialized():
            raise ValueError(f"zcoll: {what} runs on a process group of the zcoll backend; the "
                             f"default group is not initialized (call init_process_group"
                             f"(\"zcoll\") first)")
        group = dist.distributed_c10d._get_default_group()
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError(f"zcoll: {what}: this rank is not a member of the group (new_group "
                         f"returns GroupMember.NON_GROUP_MEMBER on the ranks it leaves out)")
    if not hasattr(group, "_get_backend"):
        raise TypeError(f"zcoll: {what} takes a torch.distributed ProcessGroup (or None for "
                        f"the default group), got {type(group).__name__}")
    try:
        backend = group._get_backend(torch.device("cpu"))
    except RuntimeError:
        raise ValueError(f"zcoll: {what} runs on a process group of the zcoll backend; this "
                         f"group has no CPU backend (it runs on {dist.get_backend(group)})"
                         ) from None
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps the backend in torch's ProcessGroupWrapper.
    backend = getattr(backend, "wrapped_pg", backend)
    if not isinstance(backend, _C.ZcollBackend):
        raise ValueError(f"zcoll: {what} runs on a process group of the zcoll backend; this "
                         f"group runs on {backend.name()}")
    return backend


def _finish(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


def _or0(value):
    return 0 if value is None else int(value)


def secondary_shard_numel(numel, group=None):
    """Elements of hpZ's secondary shard for shards of `numel` elements: nodes * numel."""
    return zcoll_backend(group).node_count() * numel


def quantized_all_gather(output, input, group=None, *, bits=None, block_size=None,
                         symmetric=True, stochastic=False, seed=0, async_op=False):
    """qwZ: output = the group's shards in rank order, each through quantize -> dequantize
    (identical bits on every rank, the own shard included). float32, float16, bfloat16."""
    work = zcoll_backend(group).quantized_all_gather(
        output, input, bits=_or0(bits), block_size=_or0(block_size), symmetric=symmetric,
        stochastic=stochastic, seed=seed)
    return _finish(work, async_op)


def all_gather_hier(output, input, secondary=None, group=None, *, quantized=True, bits=None,
                    block_size=None, symmetric=True, stochastic=False, seed=0, async_op=False):
    """hpZ forward: inter-node all-gather among the ranks with this rank's local index (kept in
    `secondary`, secondary_shard_numel elements, when given), then intra-node all-gather into
    output. quantized=False: exact, any dtype."""
    work = zcoll_backend(group).all_gather_hier(
        output, input, secondary, quantized=quantized, bits=_or0(bits),
        block_size=_or0(block_size), symmetric=symmetric, stochastic=stochastic, seed=seed)
    return _finish(work, async_op)


def all_gather_from_secondary(output, secondary, group=None, *, async_op=False):
    """hpZ backward: the intra-node stage only, from a secondary shard filled by
    all_gather_hier; no inter-node bytes, output bit-identical to the forward call's."""
    return _finish(zcoll_backend(group).all_gather_from_secondary(output, secondary), async_op)


def quantized_reduce_scatter(output, input, op=dist.ReduceOp.SUM, group=None, *, bits=None,
                             intra_bits=None, block_size=None, symmetric=True, stochastic=False,
                             seed=0, pipeline_depth=None, async_op=False):
    """qgZ: reduce-scatter (SUM or AVG) with block-quantized traffic in two hops (intra-node,
    then inter-node). float32, float16, bfloat16."""
    work = zcoll_backend(group).quantized_reduce_scatter(
        output, input, op, bits=_or0(bits), intra_bits=_or0(intra_bits),
        block_size=_or0(block_size), symmetric=symmetric, stochastic=stochastic, seed=seed,
        pipeline_depth=_or0(pipeline_depth))
    return _finish(work, async_op)
