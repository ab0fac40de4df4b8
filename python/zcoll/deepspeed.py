"""DeepSpeed ZeRO++ on zcoll: one call, ``zcoll.deepspeed.enable()``, before ``deepspeed.initialize``
(and before ``deepspeed.zero.Init``), with the process groups on the zcoll backend
(``deepspeed.init_distributed(dist_backend="zcoll")``).

DeepSpeed's ZeRO++ options then run on zcoll's collectives instead of DeepSpeed's CUDA-only
quantizer (``QuantizerBuilder``), on CPU today:

- ``zero_quantized_weights`` (qwZ): DeepSpeed quantizes a parameter partition with its
  ``CUDAQuantizer``, all-gathers the int8 bytes and the scales separately, and dequantizes the
  gathered buffer. The adapter replaces ``partition_parameters.CUDAQuantizer`` with
  :class:`ZcollWeightQuantizer`, whose ``quantize`` hands the partition through unchanged (with an
  empty scale tensor), and wraps ``partition_parameters._dist_allgather_fn`` so that a
  floating-point input gathered into DeepSpeed's int8 buffer becomes one
  ``zcollQuantizedAllGather`` (quantize, gather and dequantize fused; zcoll's 256-element blocks
  instead of DeepSpeed's ~8000), whose result ``dequantize`` returns. The empty scale gather is a
  no-op. Every rank gets identical bits, as zcoll promises.
- ``zero_hpz_partition_size`` (hpZ): DeepSpeed keeps a secondary partition per node and gathers it
  over an intra-node group for the backward pass. On zcoll that group is a ``zcollCommSplit``
  communicator, so the backward gather never crosses nodes (quantized as above when
  ``zero_quantized_weights`` is on). DeepSpeed's secondary partition is a contiguous slice of the
  parameter per local rank, while zcoll's ``zcollAllGatherHier`` secondary shard is strided across
  the nodes' shards, so the adapter keeps DeepSpeed's layout rather than re-partitioning.
  DeepSpeed groups consecutive ranks by ``zero_hpz_partition_size``; when that differs from the
  ranks per node (as zcoll sees the nodes), ``enable()``'s adapter warns once as DeepSpeed
  makes the groups (a RuntimeWarning): larger, the backward gather crosses nodes; smaller, each
  rank keeps a larger secondary partition than one group per node would need.
- ``zero_quantized_gradients`` (qgZ): ``stage3.all_to_all_quant_reduce`` (DeepSpeed's two-hop
  quantized all-to-all with CUDA swizzle kernels) is replaced by :func:`qgz_reduce_scatter`: the
  gradients of a bucket in one ``zcollQuantizedReduceScatter`` (Avg, INT4 both hops by default)
  over the partition layout of DeepSpeed's ``reduce_scatter_coalesced``; 1-D tensors (biases,
  norms) stay exact, as in DeepSpeed.

ZeRO stages 1 and 2 (``DeepSpeedZeroOptimizer``, which DeepSpeed itself runs unquantized
whatever these options say) honour the same two config names (:mod:`zcoll.deepspeed_zero12`):

- ``zero_quantized_weights``: the all-gather of the updated partitions after the optimizer step
  (``all_gather_dp_groups``) becomes one in-place ``zcollQuantizedAllGather`` per parameter group
  (INT8, block 256). Every rank, the partition's owner included, ends with the dequantized codes,
  so the replicas hold identical bits; each rank's fp32 master partition stays exact.
- ``zero_quantized_gradients``: DeepSpeed reduces each gradient bucket with one ``all_reduce``
  (in ``allreduce_bucket``, or ``gradient_reduction_w_predivide`` with ``reduce_scatter: false``;
  with ``reduce_scatter: true`` each rank then keeps its partition's slices), which becomes
  ``zcollQuantizedAllReduce`` (Sum after DeepSpeed's own division; INT8 on both hops and the
  gather by default, ``allreduce_bits``/``allreduce_intra_bits``), so every rank gets identical
  gradient bits; error feedback with ``allreduce_error_feedback=True`` (a residual per
  bucket, matched by its place in the step's sequence of all-reduces).
- refused (ValueError naming the setting, as the engine is built): ``zero_hpz_partition_size`` >
  1 or ``zero_quantized_nontrainable_weights`` (ZeRO-3 only), and with either option on:
  ``use_multi_rank_bucket_allreduce: false`` (DeepSpeed then calls ``dist.reduce``; for
  gradients), ZenFlow, pipeline parallelism, MoE layers, DeepCompile.

``enable`` checks the DeepSpeed version against the tested range and raises otherwise: the
entry points above are DeepSpeed internals.

Without ``enable()``, DeepSpeed fails on a CPU accelerator when those options load its quantizer
("This op had not been implemented on CPU backend."): once zcoll is imported (which
``init_process_group("zcoll")`` does), that error also says to call ``zcoll.deepspeed.enable()``
(:func:`install_hint`, whichever of zcoll and DeepSpeed is imported first).
"""
import importlib.abc
import importlib.machinery
import math
import sys
import warnings
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from . import deepspeed_zero12, zeropp

TESTED_DEEPSPEED = ((0, 19, 8), (0, 20, 0))  # [low, high)


@dataclass
class Settings:
    """Quantization of the replaced collectives (0: zcoll's defaults, docs/ZEROPP.md)."""
    weight_bits: int = 8
    weight_block_size: int = 256
    grad_bits: int = 4
    grad_intra_bits: int = 4
    grad_block_size: int = 256
    allreduce_bits: int = 8
    allreduce_intra_bits: int = 8
    allreduce_error_feedback: bool = False
    calls: dict = field(default_factory=lambda: {"qwz": 0, "qgz": 0, "allreduce": 0})


_settings = None
_results = {}  # data_ptr of DeepSpeed's int8 gather buffer -> (buffer, dequantized result)


class _Done:
    """The handle of a gather that moves nothing (the empty scale tensors)."""

    def wait(self):
        return True

    def is_completed(self):
        return True


class ZcollWeightQuantizer:
    """Stands in for DeepSpeed's CUDAQuantizer: the quantization happens inside zcoll's qwZ."""

    def quantize(self, param, groups=None):
        return param, param.new_empty((0,), dtype=torch.float32)

    def dequantize(self, quantized_param, scale, dtype=None):
        entry = _results.pop(quantized_param.data_ptr(), None)
        if entry is None:  # a partition this adapter passed through unchanged
            out = quantized_param
        else:
            out = entry[1].narrow(0, 0, quantized_param.numel()).view(quantized_param.shape)
        return out if dtype is None or out.dtype == dtype else out.to(dtype)


def _qwz_allgather(original):
    def allgather(input_tensor, output_tensor, group=None):
        if input_tensor.numel() == 0:
            return _Done()
        if not (input_tensor.is_floating_point() and output_tensor.dtype == torch.int8):
            return original(input_tensor, output_tensor, group)
        group = group if group is not None else dist.distributed_c10d._get_default_group()
        result = input_tensor.new_empty((input_tensor.numel() * dist.get_world_size(group),))
        _results[output_tensor.data_ptr()] = (output_tensor, result)
        _settings.calls["qwz"] += 1
        return zeropp.quantized_all_gather(result, input_tensor.reshape(-1), group,
                                           bits=_settings.weight_bits,
                                           block_size=_settings.weight_block_size, async_op=True)
    return allgather


def _exact_reduce_scatter():
    from deepspeed.runtime.comm.coalesced_collectives import reduce_scatter_coalesced
    return reduce_scatter_coalesced


def qgz_reduce_scatter(tensors, groups=None):
    """Each tensor's partition for this rank, averaged over the world: the layout of DeepSpeed's
    reduce_scatter_coalesced (chunks of ceil(numel / world) elements), the multi-dimensional
    tensors through one zcoll qgZ call, the 1-D ones exact."""
    world, rank = dist.get_world_size(), dist.get_rank()
    out = [None] * len(tensors)
    quantized = [i for i, t in enumerate(tensors) if t.dim() > 1]
    exact = [i for i, t in enumerate(tensors) if t.dim() <= 1]
    if exact:
        for i, r in zip(exact, _exact_reduce_scatter()([tensors[i] for i in exact])):
            out[i] = r
    if not quantized:
        return out
    chunk = [math.ceil(tensors[i].numel() / world) for i in quantized]
    pieces = []
    for r in range(world):  # rank r's padded chunks of every tensor, in tensor order
        for i, c in zip(quantized, chunk):
            flat = tensors[i].reshape(-1)[r * c:(r + 1) * c]
            pieces.append(flat)
            if flat.numel() < c:
                pieces.append(flat.new_zeros(c - flat.numel()))
    send = torch.cat(pieces)
    recv = send.new_empty(sum(chunk))
    _settings.calls["qgz"] += 1
    zeropp.quantized_reduce_scatter(recv, send, dist.ReduceOp.AVG, bits=_settings.grad_bits,
                                    intra_bits=_settings.grad_intra_bits,
                                    block_size=_settings.grad_block_size)
    offset = 0
    for i, c in zip(quantized, chunk):
        mine = max(0, min(c, tensors[i].numel() - rank * c))
        out[i] = recv.narrow(0, offset, mine)
        offset += c
    return out


def _ranks_per_node():
    """Ranks on each node of the default group, or None when the nodes hold different counts."""
    from .fsdp import ranks_per_node
    try:
        return ranks_per_node()
    except ValueError:
        return None


def hpz_partition_warning(hpz_size):
    """What is wrong with DeepSpeed's zero_hpz_partition_size `hpz_size` on this job's nodes
    ("" when it matches the ranks per node, or hpZ is off)."""
    world = dist.get_world_size()
    size = min(hpz_size, world)  # DeepSpeed clamps it so
    if size <= 1:
        return ""
    per_node = _ranks_per_node()
    nodes = zeropp.zcoll_backend(None).node_count()
    if per_node is None:
        return (f"zcoll.deepspeed: zero_hpz_partition_size={hpz_size} with nodes that hold "
                f"different numbers of ranks: DeepSpeed's groups of {size} consecutive ranks do "
                f"not follow the nodes, so hpZ's backward all-gather may cross nodes.")
    if size == per_node:
        return ""
    effect = ("so its groups of consecutive ranks span nodes and hpZ's backward all-gather "
              "crosses nodes" if size > per_node else
              "so each node holds several groups and every rank keeps a larger secondary "
              "partition than one group per node needs")
    return (f"zcoll.deepspeed: zero_hpz_partition_size={hpz_size} differs from the ranks per "
            f"node ({per_node} on each of {nodes} nodes, as zcoll sees them), {effect}. Set it "
            f"to {per_node} (zcoll.fsdp.ranks_per_node()).")


def _warning_hpz_groups(create):
    """DeepSpeed's groups._create_zero_param_parallel_group, warning first (once per process)
    when the hpZ partition size differs from the ranks per node."""
    said = []

    def create_zero_param_parallel_group(group_size):
        message = hpz_partition_warning(group_size)
        if message and not said:
            said.append(True)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        return create(group_size)
    create_zero_param_parallel_group.zcoll_wrapped = True
    return create_zero_param_parallel_group


def _check_version():
    import deepspeed
    version = tuple(int(p) for p in deepspeed.__version__.split("+")[0].split(".")[:3])
    low, high = TESTED_DEEPSPEED
    if not (low <= version < high):
        raise RuntimeError(
            f"zcoll.deepspeed.enable: tested with deepspeed >= {'.'.join(map(str, low))}, < "
            f"{'.'.join(map(str, high))}; found {deepspeed.__version__}. The adapter replaces "
            f"DeepSpeed internals (partition_parameters.CUDAQuantizer, _dist_allgather_fn, "
            f"stage3.all_to_all_quant_reduce; for stages 1 and 2 "
            f"DeepSpeedEngine._configure_zero_optimizer, stage_1_and_2's all_gather_dp_groups "
            f"and dist, DeepSpeedZeroOptimizer.allreduce_bucket) that change between versions.")


def _check_widths(**values):
    """enable()'s quantization arguments, checked before anything is replaced."""
    for name, value in values.items():
        if name.endswith("bits"):
            if value not in (4, 8):
                raise ValueError(f"zcoll.deepspeed.enable: {name}={value!r} is not 4 or 8")
        elif not (isinstance(value, int) and value % 32 == 0 and 32 <= value <= 4096):
            raise ValueError(f"zcoll.deepspeed.enable: {name}={value!r} is not a multiple of 32 "
                             f"in [32, 4096]")


def _install_zero12(settings):
    """ZeRO stages 1 and 2 (deepspeed_zero12.py): the engine's optimizer set-up, the step's
    weight gather and stage_1_and_2's all_reduce, each a pass-through for engines that do not
    ask for quantization."""
    from deepspeed.runtime import engine
    from deepspeed.runtime.zero import stage_1_and_2
    engine.DeepSpeedEngine._configure_zero_optimizer = deepspeed_zero12.configure_zero_optimizer(
        engine.DeepSpeedEngine._configure_zero_optimizer, settings)
    stage_1_and_2.all_gather_dp_groups = deepspeed_zero12.all_gather_dp_groups(
        stage_1_and_2.all_gather_dp_groups)
    deepspeed_zero12.install_comm_proxy()


def enable(weight_bits=8, weight_block_size=256, grad_bits=4, grad_intra_bits=4,
           grad_block_size=256, allreduce_bits=8, allreduce_intra_bits=8,
           allreduce_error_feedback=False):
    """Routes DeepSpeed's ZeRO++ collectives through zcoll (see the module docstring). Returns
    the Settings, whose ``calls`` counts the qwZ gathers (ZeRO-3 and ZeRO-1/2), the ZeRO-3 qgZ
    calls and the ZeRO-1/2 quantized all-reduces made.

    weight_bits / weight_block_size: qwZ's (every stage). grad_bits / grad_intra_bits: ZeRO-3's
    qgZ hops; allreduce_bits / allreduce_intra_bits: ZeRO-1/2's quantized gradient all-reduce
    (its inter-node hop and gather / its intra-node hop); grad_block_size: both.
    allreduce_error_feedback: the ZeRO-1/2 gradient all-reduce keeps a residual per bucket
    (fp32, zeropp.residual_size bytes: 1.75x the bucket's fp32 bytes on 2 nodes x 2 ranks)."""
    global _settings
    _check_widths(weight_bits=weight_bits, weight_block_size=weight_block_size,
                  grad_bits=grad_bits, grad_intra_bits=grad_intra_bits,
                  grad_block_size=grad_block_size, allreduce_bits=allreduce_bits,
                  allreduce_intra_bits=allreduce_intra_bits)
    _check_version()
    from deepspeed.runtime.zero import partition_parameters, stage3
    from deepspeed.utils import groups
    if _settings is None:
        groups._create_zero_param_parallel_group = _warning_hpz_groups(
            groups._create_zero_param_parallel_group)
        partition_parameters._dist_allgather_fn = _qwz_allgather(
            partition_parameters._dist_allgather_fn)
        partition_parameters.CUDAQuantizer = ZcollWeightQuantizer
        stage3.all_to_all_quant_reduce = qgz_reduce_scatter
        _settings = Settings()
        _install_zero12(_settings)
    _settings.weight_bits, _settings.weight_block_size = weight_bits, weight_block_size
    _settings.grad_bits, _settings.grad_intra_bits = grad_bits, grad_intra_bits
    _settings.grad_block_size = grad_block_size
    _settings.allreduce_bits, _settings.allreduce_intra_bits = allreduce_bits, allreduce_intra_bits
    _settings.allreduce_error_feedback = bool(allreduce_error_feedback)
    return _settings


HINT = ("DeepSpeed's ZeRO++ options zero_quantized_weights and zero_quantized_gradients (and "
        "zero_hpz_partition_size with them) need DeepSpeed's CUDA quantizer (QuantizerBuilder), "
        "which this accelerator does not have. On the zcoll backend, call "
        "zcoll.deepspeed.enable() before deepspeed.initialize (and before deepspeed.zero.Init): "
        "they then run on zcoll's collectives (python/README.md, DeepSpeed).")
_OP_BUILDER = "deepspeed.ops.op_builder"


def _hinting(builder_factory):
    """DeepSpeed's QuantizerBuilder, whose load() failure says what to call while enable() has
    not been called."""
    def QuantizerBuilder(*args, **kwargs):
        builder = builder_factory(*args, **kwargs)
        load = builder.load

        def load_with_hint(*a, **k):
            try:
                return load(*a, **k)
            except ValueError as err:  # a CPU accelerator's NotImplementedBuilder
                if _settings is not None:
                    raise
                raise ValueError(f"{err} {HINT}") from err
        builder.load = load_with_hint
        return builder
    QuantizerBuilder.zcoll_hint = True
    return QuantizerBuilder


class _AfterOpBuilderImport(importlib.abc.MetaPathFinder):
    """Installs the hint once DeepSpeed's op_builder module is imported (after zcoll)."""

    def find_spec(self, name, path, target=None):
        if name != _OP_BUILDER:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_hint(module):
            exec_module(module)
            install_hint()
        spec.loader.exec_module = exec_then_hint
        return spec


def install_hint():
    """Makes DeepSpeed's failure to load its quantizer (ZeRO++ options on CPU without
    enable()) name zcoll.deepspeed.enable(). Idempotent; for a DeepSpeed imported later, waits
    for its import."""
    module = sys.modules.get(_OP_BUILDER)
    if module is None:
        if not any(isinstance(f, _AfterOpBuilderImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _AfterOpBuilderImport())
        return
    factory = getattr(module, "QuantizerBuilder", None)
    if factory is not None and not getattr(factory, "zcoll_hint", False):
        module.QuantizerBuilder = _hinting(factory)
