"""DDP's gradient all-reduce through zcoll's quantized all-reduce (docs/ZEROPP.md, "Quantized
all-reduce"): a communication hook for ``DistributedDataParallel.register_comm_hook``.

    import zcoll.ddp
    model = DistributedDataParallel(model)                    # on a zcoll process group
    state = zcoll.ddp.QuantizedAllReduceState(start_iter=10)  # INT8, error feedback
    model.register_comm_hook(state, zcoll.ddp.quantized_allreduce_hook)

Each gradient bucket is averaged over the group with block-quantized traffic (qgZ's two hops,
then qwZ's gather of the reduced chunks); every rank gets identical bits, so the replicas'
parameters never drift apart. The first ``start_iter`` iterations run the exact all-reduce
(as PowerSGD's ``start_powerSGD_iter``), and so do buckets below ``min_bucket_bytes`` or of a
dtype zcoll does not quantize (float64); zcoll itself runs the exact all-reduce for buckets
below 256 KiB. With error feedback the state keeps one residual buffer per bucket.
"""
import torch
import torch.distributed as dist

from . import zeropp

__all__ = ["QuantizedAllReduceState", "quantized_allreduce_hook"]

_QUANTIZABLE = (torch.float32, torch.float16, torch.bfloat16)


def _check_bits(name, value, allowed=(4, 8)):
    if value not in allowed:
        raise ValueError(f"zcoll: QuantizedAllReduceState {name}={value!r} is not "
                         f"{', '.join(map(str, allowed[:-1]))} or {allowed[-1]}")


def _check_count(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"zcoll: QuantizedAllReduceState {name}={value!r} is not an integer "
                         f">= 0")


class QuantizedAllReduceState:
    """The state of :func:`quantized_allreduce_hook`; one per DDP model.

    process_group: the group DDP reduces over (None: the default group); it must run on zcoll.
    bits: the width of the inter-node hop and of the gather (4 or 8). intra_bits: the
    intra-node hop's (4, 8, or 16 for 16-bit floats). block_size: elements per quantization block (None: 256).
    error_feedback: keep each bucket's quantization error and add it back the next iteration.
    start_iter: iterations run with the exact all-reduce before quantizing starts.
    min_bucket_bytes: buckets smaller than this run the exact all-reduce.

    iter counts the iterations whose gradients were all-reduced (a no_sync step calls no hook, so
    it is not counted); residuals maps a bucket's index to its residual buffer (float32, of
    zeropp.residual_size bytes)."""

    __slots__ = ("process_group", "bits", "intra_bits", "block_size", "error_feedback",
                 "start_iter", "min_bucket_bytes", "iter", "residuals", "_layouts")

    def __init__(self, process_group=None, *, bits=8, intra_bits=8, block_size=None,
                 error_feedback=True, start_iter=10, min_bucket_bytes=0):
        _check_bits("bits", bits)
        _check_bits("intra_bits", intra_bits, (4, 8, 16))
        _check_count("start_iter", start_iter)
        _check_count("min_bucket_bytes", min_bucket_bytes)
        if block_size is not None:
            _check_count("block_size", block_size)
        self.process_group = process_group
        self.bits = bits
        self.intra_bits = intra_bits
        self.block_size = block_size
        self.error_feedback = bool(error_feedback)
        self.start_iter = start_iter
        self.min_bucket_bytes = min_bucket_bytes
        self.iter = 0
        self.residuals = {}
        self._layouts = {}  # bucket index -> what its residual was made for

    def _quant(self):
        return {"bits": self.bits, "intra_bits": self.intra_bits, "block_size": self.block_size}

    def quantizes(self, tensor):
        """Whether the hook quantizes this bucket now (else: the exact all-reduce)."""
        return (self.iter >= self.start_iter and tensor.dtype in _QUANTIZABLE
                and tensor.numel() * tensor.element_size() >= self.min_bucket_bytes)

    def residual(self, bucket, tensor):
        """The residual buffer of this bucket: zeroed when first made, made anew when the bucket
        changed (DDP rebuilds its buckets after the first iteration: the same index may then
        hold other parameters, whose error the old residual is not)."""
        index = bucket.index()
        layout = (tensor.numel(), tensor.dtype, tensor.device,
                  tuple(p.data_ptr() for p in bucket.parameters()))
        if self._layouts.get(index) != layout:
            self.residuals[index] = zeropp.new_residual(tensor, self.process_group,
                                                        dtype=torch.float32, **self._quant())
            self._layouts[index] = layout
        return self.residuals[index]

    def end_bucket(self, bucket):
        # DDP reduces bucket 0 last: is_last() ends the iteration.
        if bucket.is_last():
            self.iter += 1


def _first_value(fut):
    return fut.value()[0]


def _exact_mean(group, tensor):
    """torch's default all-reduce hook: divide first, then sum (DDP's result without a hook)."""
    size = group.size() if group is not None else dist.get_world_size()
    tensor.div_(size)
    return dist.all_reduce(tensor, group=group, async_op=True).get_future().then(_first_value)


def quantized_allreduce_hook(state, bucket):
    """DDP communication hook: the bucket's gradients averaged over state.process_group by
    zcoll's quantized all-reduce (with error feedback when state.error_feedback), or exactly
    (see QuantizedAllReduceState). Returns the Future of the averaged bucket, as DDP expects."""
    tensor = bucket.buffer()
    quantize = state.quantizes(tensor)
    residual = state.residual(bucket, tensor) if quantize and state.error_feedback else None
    state.end_bucket(bucket)
    if not quantize:
        return _exact_mean(state.process_group, tensor)
    work = zeropp.quantized_all_reduce(tensor, state.process_group, dist.ReduceOp.AVG,
                                       residual=residual, async_op=True, **state._quant())
    return work.get_future().then(_first_value)
