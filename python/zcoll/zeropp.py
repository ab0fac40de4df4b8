"""The ZeRO++ collectives (docs/ZEROPP.md) on zcoll process groups, torch.distributed style.

Each function takes its output tensor first (like ``all_gather_into_tensor``), runs on the
group's zcoll communicator in submission order with the group's other operations, and returns a
``Work`` when ``async_op=True`` (else waits and returns None). Quantization settings left at None
take zcoll's documented defaults (qwZ / hpZ: INT8, block 256; qgZ: INT4 both hops, block 256;
the quantized all-reduce: INT8 everywhere, block 256; symmetric, round to nearest even).

    import zcoll.zeropp as zpp
    zpp.quantized_all_gather(full, shard)                     # qwZ
    sec = torch.empty(zpp.secondary_shard_numel(shard.numel()), dtype=shard.dtype)
    zpp.all_gather_hier(full, shard, sec)                     # hpZ forward: keeps the secondary
    zpp.all_gather_from_secondary(full, sec)                  # hpZ backward: no inter-node bytes
    zpp.quantized_reduce_scatter(grad_shard, grad, op=dist.ReduceOp.AVG)   # qgZ
    res = zpp.new_residual(grad)                              # error feedback, kept per tensor
    zpp.quantized_all_reduce(grad, op=dist.ReduceOp.AVG, residual=res)  # qgZ then qwZ

Keep training after a rank dies (docs/FAULT_TOLERANCE.md, "Keep training"; CPU tensors): after
``dist.shrink_group``, the new group rebuilds the dead rank's weight shard from hpZ's
secondaries and its optimizer state from the opt-in buddy copies, re-partitioned over the new
world size (python/examples/keep_training_zeropp.py):

    zpp.buddy_copy(copy, state_shard)                         # every step, after the update
    ... dist.shrink_group(gone, shrink_flags=c10d.SHRINK_ABORT)
    zpp.rebuild_from_secondary(new_shard, secondary, shard.numel(), total)
    zpp.rebuild_from_buddy(new_state, state_shard, copy, total)
"""
import torch
import torch.distributed as dist

from . import _torch  # noqa: F401  (torch check, backend registration, torch.ops.zcoll)
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
    then inter-node). float32, float16, bfloat16. bits: 4 or 8; intra_bits: 4, 8 or 16 (16: the
    intra-node hop as 16-bit floats, exact for float16/bfloat16; docs/ZEROPP.md "qgZ")."""
    work = zcoll_backend(group).quantized_reduce_scatter(
        output, input, op, bits=_or0(bits), intra_bits=_or0(intra_bits),
        block_size=_or0(block_size), symmetric=symmetric, stochastic=stochastic, seed=seed,
        pipeline_depth=_or0(pipeline_depth))
    return _finish(work, async_op)


def quantized_all_reduce(tensor, group=None, op=dist.ReduceOp.SUM, *, bits=None,
                         intra_bits=None, block_size=None, symmetric=True, stochastic=False,
                         seed=0, pipeline_depth=None, residual=None, async_op=False):
    """In place: tensor = the reduction (SUM or AVG) of every rank's tensor, with block-quantized
    traffic (zcollQuantizedAllReduce: qgZ's reduce-scatter, then qwZ's gather of the reduced
    chunks at `bits`); every rank ends with identical bits. Defaults: INT8 on both hops and the
    gather, block 256 (intra_bits 16: the intra-node hop as 16-bit floats). Below 256 KiB per
    rank zcoll runs the exact all-reduce. float32, float16, bfloat16, CPU or CUDA.

    residual: error feedback (zcollQuantizedAllReduceWithResidual): a contiguous uint8 or
    float32 tensor of residual_size(...) bytes on the tensor's device, zeroed before the first
    call (new_residual makes one), kept by the caller between calls for this tensor's size and
    group; the call adds it before quantizing and keeps the new quantization error in it."""
    work = zcoll_backend(group, "quantized_all_reduce").quantized_all_reduce(
        tensor, op, bits=_or0(bits), intra_bits=_or0(intra_bits), block_size=_or0(block_size),
        symmetric=symmetric, stochastic=stochastic, seed=seed,
        pipeline_depth=_or0(pipeline_depth), residual=residual)
    return _finish(work, async_op)


def residual_size(numel, dtype=torch.float32, group=None, *, bits=None, intra_bits=None,
                  block_size=None, symmetric=True, stochastic=False, seed=0,
                  pipeline_depth=None):
    """Bytes of quantized_all_reduce's residual buffer for `numel` elements of `dtype` on
    `group` (zcollQuantizedAllReduceResidualSize): 4*C*(W+N+1) on two-hop layouts (N nodes of
    more than one rank), 4*C*(W+1) otherwise, C = numel // W."""
    return zcoll_backend(group, "residual_size").quantized_all_reduce_residual_bytes(
        int(numel), dtype, bits=_or0(bits), intra_bits=_or0(intra_bits),
        block_size=_or0(block_size), symmetric=symmetric, stochastic=stochastic, seed=seed,
        pipeline_depth=_or0(pipeline_depth))


def new_residual(tensor, group=None, *, dtype=torch.uint8, **quant):
    """A zeroed residual buffer for quantized_all_reduce of `tensor` on `group`, on the tensor's
    device: residual_size(tensor.numel(), tensor.dtype, group, **quant) bytes, as a uint8 tensor
    (dtype=torch.float32: a float32 one of a quarter of the elements)."""
    if dtype not in (torch.uint8, torch.float32):
        raise TypeError(f"zcoll: new_residual makes a torch.uint8 or torch.float32 tensor, got "
                        f"{dtype}")
    nbytes = residual_size(tensor.numel(), tensor.dtype, group, **quant)
    return torch.zeros(nbytes // dtype.itemsize, dtype=dtype, device=tensor.device)


def local_size(group=None):
    """Ranks on this rank's node in `group` (hpZ needs the same number on every node)."""
    return zcoll_backend(group, "local_size").local_size()


def buddy_copy_numel(numel, group=None):
    """Elements of the buddy copy this rank keeps for shards of `numel` elements: numel times
    the number of ranks whose buddy it is (1 each on an even layout). Needs 2 nodes or more."""
    return zcoll_backend(group, "buddy_copy_numel").buddy_copy_numel(int(numel))


def buddy_copy(copy, shard, group=None):
    """Opt-in copy of optimizer state on another node (zcollBuddyCopy): every rank's `shard`
    goes to its buddy, the rank of the next node with its local index (modulo that node's
    size); `copy` (buddy_copy_numel elements) receives the shards of the ranks whose buddy this
    rank is. CPU tensors, any dtype, every rank the same numel. Blocking, like the two rebuilds:
    each runs once the group's operations issued before it have completed."""
    zcoll_backend(group, "buddy_copy").buddy_copy(copy, shard)


def rebuild_from_secondary(output, secondary, shard_numel, total_numel, primary=None, group=None):
    """After dist.shrink_group made `group`: this rank's shard of the flat vector V for the new
    world size, output = V[rank * n, (rank + 1) * n) with n = output.numel() (zeros past
    total_numel), where V was partitioned over the old group in shards of `shard_numel`
    (zcollRebuildFromSecondary with oldComm NULL). A dead rank's shard comes from the hpZ
    `secondary` shards of its rail's survivors (each passes the one its last good all_gather_hier
    filled on the old group), survivors' from their `primary` (or from their secondary when
    primary is None, on every rank). CPU tensors; blocking."""
    zcoll_backend(group, "rebuild_from_secondary").rebuild_from_secondary(
        output, secondary, primary, int(shard_numel), int(total_numel))


def rebuild_from_buddy(output, primary, copy, total_numel, group=None):
    """As rebuild_from_secondary, for state kept with buddy_copy: survivors' shards from their
    `primary`, a dead rank's from its buddy's `copy` (zcollRebuildFromBuddy). CPU tensors;
    blocking."""
    zcoll_backend(group, "rebuild_from_buddy").rebuild_from_buddy(
        output, primary, copy, int(total_numel))
