"""ZeRO++ inside PyTorch FSDP2 (``torch.distributed.fsdp.fully_shard``) on zcoll process groups.

Two comm objects that follow torch's FSDP2 protocol (torch/distributed/fsdp/_fully_shard/
_fsdp_api.py: ``allocate(size, *, dtype, device)`` and ``__call__``), set with torch's own
``FSDPModule.set_custom_all_gather`` / ``set_custom_reduce_scatter``:

    from torch.distributed.fsdp import fully_shard
    import zcoll.fsdp
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=zcoll.fsdp.ranks_per_node())   # hpZ
    fully_shard(model, reshard_after_forward=zcoll.fsdp.ranks_per_node())
    zcoll.fsdp.zeropp(model)      # qwZ forward gathers + qgZ gradients on every FSDP module

* :class:`QuantizedAllGather` (qwZ): FSDP's flat all-gather input goes through zcoll's
  block-quantized all-gather (INT8 by default), so every rank ends with the same bits for every
  shard (its own included). A gather whose group lies on one node (hpZ's backward gather on the
  post-forward group, or an HSDP shard group) is exact by default: it reproduces the forward's
  dequantized weights bit for bit, as ZeRO++'s gather from the secondary shard does.
* :class:`QuantizedReduceScatter` (qgZ): FSDP's flat gradient goes through zcoll's quantized
  two-hop reduce-scatter (INT4 both hops by default; intra-node, then inter-node; fp32
  accumulation), with the op FSDP asks for: SUM, AVG, or PREMUL_SUM(f) (FSDP2's gradient divide
  factor: the SUM times f).
* :func:`zeropp`: one call that sets both on every FSDP module of a model (each switchable) and
  checks hpZ (``reshard_after_forward`` = ranks per node); with ``modules=`` it also wraps the
  model (fully_shard on each of ``modules``, then on the model). On one node it says once per
  process (a RuntimeWarning) that qwZ and hpZ run exact there.
* :func:`quantized_replicate_all_reduce`: HSDP's replicate all-reduce through zcoll's quantized
  all-reduce (:class:`QuantizedReplicateAllReduce`, torch's ``set_all_reduce_hook``) on a model
  sharded on the shard dimension's 1-D mesh (torch 2.15's native 2-D HSDP all-reduces inside
  FSDP, before that hook, so it cannot be replaced there).

Dtypes: float32, float16, bfloat16 are quantized as they are; float64 goes through float32 (the
quantization error is far above float32's rounding). Anything else, and the uint8 buffer FSDP
builds when one module's all-gather inputs mix dtypes, cannot be quantized: by default it is
gathered / reduced exactly with a warning said once (``unsupported="exact"``), or refused with
a TypeError naming the dtype (``unsupported="raise"``).
"""
import math
import os
import socket
import warnings
from collections import Counter

import torch
import torch.distributed as dist

from . import zeropp as _zpp

__all__ = ["QuantizedAllGather", "QuantizedReduceScatter", "zeropp", "ranks_per_node",
           "backward_gather_groups", "QuantizedReplicateAllReduce",
           "quantized_replicate_all_reduce"]

_QUANTIZABLE = (torch.float32, torch.float16, torch.bfloat16)
_said = set()


def _say_once(key, message):
    if key not in _said:
        _said.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


try:  # torch's base classes when present (isinstance checks), plain objects otherwise
    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather as _AllGatherBase
    from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter as _ReduceScatterBase
except ImportError:  # pragma: no cover - torch without FSDP2 comm hooks
    _AllGatherBase = _ReduceScatterBase = object


def ranks_per_node(group=None):
    """Ranks per node of `group` (default: the default group), as zcoll sees the layout
    (ZCOLL_HOSTID or host identity): the ``reshard_after_forward`` that makes FSDP2's backward
    all-gather hpZ's (the post-forward shard is the node's, the gather stays on the node).
    Raises ValueError when the nodes have different numbers of ranks."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    nodes = _zpp.zcoll_backend(pg).node_count()
    sizes = _node_sizes(pg)
    if len(set(sizes)) != 1:
        raise ValueError(f"zcoll.fsdp: hpZ needs the same number of ranks on every node; this "
                         f"group's nodes have {sizes} ranks")
    assert len(sizes) == nodes, (sizes, nodes)
    return sizes[0]


_node_sizes_cache = {}


def _host_id():
    return os.environ.get("ZCOLL_HOSTID") or socket.gethostname()


def _node_sizes(pg):
    """Ranks on each node of `pg` (node order by lowest rank). The node count comes from zcoll;
    the sizes from one all_gather_object of the host identity (ZCOLL_HOSTID, else the host
    name), once per group, and only when the count alone does not settle them."""
    key = pg.group_name
    if key not in _node_sizes_cache:
        size, nodes = pg.size(), _zpp.zcoll_backend(pg).node_count()
        if nodes == 1:
            sizes = [size]
        elif nodes == size:
            sizes = [1] * size
        else:
            ids = [None] * size
            dist.all_gather_object(ids, _host_id(), group=pg)
            counts = Counter(ids)
            sizes = [counts[h] for h in dict.fromkeys(ids)]
            if len(sizes) != nodes:  # host names disagree with zcoll's view: trust zcoll's count
                sizes = [size // nodes] * nodes if size % nodes == 0 else [0] * nodes
        _node_sizes_cache[key] = sizes
    return _node_sizes_cache[key]


def _allocate(size, dtype, device, registered):
    if registered and torch.device(device).type == "cpu":
        from . import empty_host
        return empty_host(tuple(int(s) for s in size), dtype=dtype)
    return torch.empty(*size, dtype=dtype, device=device)


class _Settings:
    def __init__(self, unsupported, registered_memory):
        if unsupported not in ("exact", "raise"):
            raise ValueError(f"zcoll.fsdp: unsupported= takes 'exact' or 'raise', got "
                             f"{unsupported!r}")
        self.unsupported = unsupported
        self.registered_memory = bool(registered_memory)
        # What ran, for tests and curious users: (kind, group size, nodes of the group) -> calls.
        self.calls = Counter()

    def _unsupported_dtype(self, what, dtype):
        if dtype == torch.uint8:
            why = ("torch.uint8: FSDP packs the all-gather inputs of one module as bytes when "
                   "their dtypes differ (e.g. a MixedPrecisionPolicy param_dtype_override_fn "
                   "or fsdp_pre_all_gather extensions), and bytes cannot be block-quantized")
        else:
            why = f"{dtype}: zcoll quantizes float32, float16, bfloat16 (float64 via float32)"
        if self.unsupported == "raise":
            raise TypeError(f"zcoll.fsdp.{what}: cannot quantize {why}. Give those parameters "
                            f"one floating dtype, or construct {what}(unsupported='exact') to "
                            f"run them unquantized.")
        _say_once((what, dtype), f"zcoll.fsdp.{what}: cannot quantize {why}; running this "
                  f"collective unquantized (exact). Said once per dtype.")

    def allocate(self, size, *, dtype, device):
        return _allocate(size, dtype, device, self.registered_memory)


class QuantizedAllGather(_Settings, _AllGatherBase):
    """qwZ as FSDP2's all-gather: ``model.set_custom_all_gather(QuantizedAllGather())``.

    bits (8 or 4), block_size (default 256), symmetric, stochastic, seed: zcoll's quantization
    settings (docs/ZEROPP.md; None or 0 takes zcoll's default). within_node=False: a gather whose
    group lies on one node runs exact (hpZ's backward gather and HSDP shard groups: nothing
    crosses nodes there, and re-quantizing hpZ's already dequantized weights would make the
    backward weights differ from the forward's); True quantizes those too. unsupported:
    'exact' (default) or 'raise' for dtypes zcoll cannot quantize. registered_memory=True:
    allocate() returns zcollMemAllocHost memory for CPU buffers (zcoll.empty_host; a fresh
    registration per call costs about 1.2 ms per MiB on the test VM, so it pays only for large
    exact intra-node gathers)."""

    def __init__(self, *, bits=8, block_size=None, symmetric=True, stochastic=False, seed=0,
                 within_node=False, unsupported="exact", registered_memory=False):
        if bits not in (None, 4, 8):
            raise ValueError(f"zcoll.fsdp.QuantizedAllGather: bits must be 8 or 4, got {bits!r}")
        _Settings.__init__(self, unsupported, registered_memory)
        self.bits, self.block_size = bits, block_size
        self.symmetric, self.stochastic, self.seed = symmetric, stochastic, seed
        self.within_node = within_node

    def __call__(self, output_tensor, input_tensor, group, async_op=False):
        backend = _zpp.zcoll_backend(group)
        nodes = backend.node_count()
        dtype = input_tensor.dtype
        if nodes == 1 and not self.within_node:
            self.calls[("exact", group.size(), nodes)] += 1
            return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group,
                                               async_op=async_op)
        if dtype not in _QUANTIZABLE and dtype != torch.float64:
            self._unsupported_dtype("QuantizedAllGather", dtype)
            self.calls[("exact", group.size(), nodes)] += 1
            return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group,
                                               async_op=async_op)
        self.calls[("quantized", group.size(), nodes)] += 1
        kw = dict(bits=self.bits, block_size=self.block_size, symmetric=self.symmetric,
                  stochastic=self.stochastic, seed=self.seed)
        if dtype == torch.float64:  # through float32, synchronously (FSDP takes None as done)
            out32 = torch.empty(output_tensor.shape, dtype=torch.float32,
                                device=output_tensor.device)
            _zpp.quantized_all_gather(out32, input_tensor.float(), group, **kw)
            output_tensor.copy_(out32)
            return None
        return _zpp.quantized_all_gather(output_tensor, input_tensor, group, async_op=async_op,
                                         **kw)


def _op_kind(op):
    return op if isinstance(op, dist.ReduceOp.RedOpType) else op.op


class QuantizedReduceScatter(_Settings, _ReduceScatterBase):
    """qgZ as FSDP2's reduce-scatter: ``model.set_custom_reduce_scatter(QuantizedReduceScatter())``.

    bits (inter-node hop, default 4), intra_bits (intra-node hop, default 4), block_size (256),
    symmetric, stochastic, seed, pipeline_depth: zcoll's settings (docs/ZEROPP.md). Ops: SUM,
    AVG (the fp32 sum times 1/W), PREMUL_SUM(f) (the quantized SUM, then times f: quantization
    scales with its input, so this is the premultiplied sum up to the output dtype's rounding).
    Other ops (MIN, MAX, ...) and dtypes zcoll cannot quantize run exact through the group
    (unsupported='exact', said once) or raise (unsupported='raise'). A group whose nodes hold
    different numbers of ranks cannot take the two-hop algorithm: zcoll runs its flat one-hop
    quantized reduce-scatter (one quantization at `bits`) and this says so once."""

    def __init__(self, *, bits=4, intra_bits=4, block_size=None, symmetric=True, stochastic=False,
                 seed=0, pipeline_depth=None, unsupported="exact", registered_memory=False):
        for name, value, ok, say in (("bits", bits, (None, 4, 8), "8 or 4"),
                                     ("intra_bits", intra_bits, (None, 4, 8, 16), "16, 8 or 4")):
            if value not in ok:
                raise ValueError(f"zcoll.fsdp.QuantizedReduceScatter: {name} must be {say}, "
                                 f"got {value!r}")
        _Settings.__init__(self, unsupported, registered_memory)
        self.bits, self.intra_bits, self.block_size = bits, intra_bits, block_size
        self.symmetric, self.stochastic, self.seed = symmetric, stochastic, seed
        self.pipeline_depth = pipeline_depth

    def __call__(self, output_tensor, input_tensor, group, op=dist.ReduceOp.SUM, async_op=False):
        backend = _zpp.zcoll_backend(group)
        nodes = backend.node_count()
        kind = _op_kind(op)
        dtype = input_tensor.dtype
        if kind == dist.ReduceOp.PREMUL_SUM:
            factor = _premul_factor(op)
            if factor is None:
                raise ValueError("zcoll.fsdp.QuantizedReduceScatter: PREMUL_SUM without a "
                                 "readable factor (neither ReduceOp.factor nor its pickled "
                                 "state has one)")
            factor = float(factor.item() if isinstance(factor, torch.Tensor) else factor)
            zop = dist.ReduceOp.SUM
        elif kind in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
            factor, zop = None, kind
        else:
            if self.unsupported == "raise":
                raise ValueError(f"zcoll.fsdp.QuantizedReduceScatter: op {kind} cannot be "
                                 f"quantized (SUM, AVG, PREMUL_SUM)")
            _say_once(("rs-op", str(kind)), f"zcoll.fsdp.QuantizedReduceScatter: op {kind} "
                      f"cannot be quantized (SUM, AVG, PREMUL_SUM); running it exact. Said once.")
            return self._exact(output_tensor, input_tensor, group, op, async_op, nodes)
        if dtype not in _QUANTIZABLE and dtype != torch.float64:
            self._unsupported_dtype("QuantizedReduceScatter", dtype)
            return self._exact(output_tensor, input_tensor, group, op, async_op, nodes)
        sizes = _node_sizes(group)
        if len(set(sizes)) != 1:
            _say_once(("rs-flat", tuple(sizes)), f"zcoll.fsdp.QuantizedReduceScatter: this "
                      f"group's nodes hold {sizes} ranks (not the same on every node), so qgZ's "
                      f"two-hop algorithm cannot run; zcoll falls back to its flat quantized "
                      f"reduce-scatter (one all-to-all over all ranks, one quantization at "
                      f"{self.bits or 4} bits). Said once.")
        self.calls[("quantized", group.size(), nodes)] += 1
        kw = dict(bits=self.bits, intra_bits=self.intra_bits, block_size=self.block_size,
                  symmetric=self.symmetric, stochastic=self.stochastic, seed=self.seed,
                  pipeline_depth=self.pipeline_depth)
        if dtype == torch.float64:
            out32 = torch.empty(output_tensor.shape, dtype=torch.float32,
                                device=output_tensor.device)
            _zpp.quantized_reduce_scatter(out32, input_tensor.float(), zop, group, **kw)
            output_tensor.copy_(out32)
            if factor is not None:
                output_tensor.mul_(factor)
            return None
        if factor is None:
            return _zpp.quantized_reduce_scatter(output_tensor, input_tensor, zop, group,
                                                 async_op=async_op, **kw)
        _zpp.quantized_reduce_scatter(output_tensor, input_tensor, zop, group, **kw)
        output_tensor.mul_(factor)
        return None

    def _exact(self, output_tensor, input_tensor, group, op, async_op, nodes):
        self.calls[("exact", group.size(), nodes)] += 1
        return dist.reduce_scatter_tensor(output_tensor, input_tensor, op=op, group=group,
                                          async_op=async_op)


def _fsdp_modules(model):
    from torch.distributed.fsdp import FSDPModule
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def zeropp(model, *, qwz=True, hpz=True, qgz=True, weight_bits=8, grad_bits=4,
           grad_intra_bits=4, block_size=None, modules=None, **fully_shard_kwargs):
    """Turns a model on zcoll process groups into ZeRO++ under FSDP2; returns the model.

    * Already wrapped (fully_shard applied to it and/or its blocks): sets
      :class:`QuantizedAllGather` (qwz) and :class:`QuantizedReduceScatter` (qgz) on every FSDP
      module, with torch's ``set_custom_all_gather`` / ``set_custom_reduce_scatter``. hpz checks
      that every module that reshards after forward was wrapped with ``reshard_after_forward=
      ranks_per_node()`` (FSDP2 fixes the post-forward group when it wraps); ValueError
      otherwise, naming the module.
    * Not yet wrapped, with ``modules=`` (e.g. ``model.layers``): calls ``fully_shard`` on each
      of them, then on the model, with ``fully_shard_kwargs`` (mesh, mp_policy, ...) and, for
      hpz, ``reshard_after_forward=ranks_per_node(shard group)``; then as above.

    Each of qwz / hpz / qgz can be switched off; the rest stays torch's default comm."""
    from torch.distributed.fsdp import fully_shard
    fsdp_modules = _fsdp_modules(model)
    if not fsdp_modules:
        if modules is None:
            raise ValueError("zcoll.fsdp.zeropp: the model has no FSDP module: wrap it with "
                             "fully_shard first, or pass modules=[...] (the blocks to shard "
                             "one by one) and fully_shard's arguments, and zeropp wraps it")
        kwargs = dict(fully_shard_kwargs)
        if hpz:
            if "reshard_after_forward" in kwargs:
                raise ValueError("zcoll.fsdp.zeropp: hpz=True sets reshard_after_forward "
                                 "itself (ranks per node); pass hpz=False to choose it")
            mesh = kwargs.get("mesh")
            shard_group = None
            if mesh is not None:
                shard_group = mesh.get_group(mesh.ndim - 1) if mesh.ndim > 1 else mesh.get_group()
            per_node = ranks_per_node(shard_group)
            size = shard_group.size() if shard_group is not None else dist.get_world_size()
            # FSDP2 takes an int < the shard group size; equal to it is plain resharding
            kwargs["reshard_after_forward"] = True if per_node >= size else per_node
        for m in modules:
            fully_shard(m, **kwargs)
        fully_shard(model, **kwargs)
        fsdp_modules = _fsdp_modules(model)
    elif modules is not None or fully_shard_kwargs:
        raise ValueError("zcoll.fsdp.zeropp: the model is already wrapped by fully_shard; "
                         "modules= and fully_shard's arguments apply only to an unwrapped model")
    _say_if_one_node(fsdp_modules, qwz, hpz, qgz, grad_intra_bits)
    all_gather = QuantizedAllGather(bits=weight_bits, block_size=block_size) if qwz else None
    reduce_scatter = (QuantizedReduceScatter(bits=grad_bits, intra_bits=grad_intra_bits,
                                             block_size=block_size) if qgz else None)
    for m in fsdp_modules:
        if hpz:
            _check_hpz(m)
        if all_gather is not None:
            m.set_custom_all_gather(all_gather)
        if reduce_scatter is not None:
            m.set_custom_reduce_scatter(reduce_scatter)
    model._zcoll_zeropp = (all_gather, reduce_scatter)
    return model


def _shard_groups(fsdp_modules):
    """The distinct shard groups (this rank's) of the FSDP modules' parameter groups."""
    groups = {}
    for m in fsdp_modules:
        for pg_ in _param_groups(m._get_fsdp_state()):
            group = pg_.mesh_info.shard_process_group
            groups.setdefault(group.group_name, group)
    return list(groups.values())


def _say_if_one_node(fsdp_modules, qwz, hpz, qgz, grad_intra_bits):
    """Says once per process when every shard group lies on one node: qwZ's gathers then run
    exact (QuantizedAllGather quantizes only gathers that cross nodes) and hpZ's resharding to
    the node is plain resharding (the node is the whole shard group)."""
    if not (qwz or hpz):
        return
    groups = _shard_groups(fsdp_modules)
    try:
        if not groups or any(_zpp.zcoll_backend(g).node_count() != 1 for g in groups):
            return
    except ValueError:  # not on zcoll: the comm objects say so when they run
        return
    what = " and ".join(name for name, on in (("qwZ", qwz), ("hpZ", hpz)) if on)
    grads = (f"; qgZ still quantizes the gradients' reduce-scatter (intra-node hop, "
             f"{'16-bit floats' if grad_intra_bits == 16 else f'INT{grad_intra_bits or 4}'})"
             if qgz else "")
    _say_once(("one-node",),
              f"zcoll.fsdp.zeropp: the model's shard group lies on one node, so {what} run "
              f"exact there: the weight all-gathers are unquantized (nothing crosses nodes) and "
              f"resharding to the node's ranks is plain resharding{grads}. Emulate nodes with "
              f"ZCOLL_HOSTID (tools/zcollrun --nodes K) to exercise them on one machine. Said "
              f"once per process.")


def _premul_factor(op):
    """A PREMUL_SUM ReduceOp's factor (a float or a one-element tensor), or None: torch 2.15
    has ``op.factor``; torch 2.11 only gives it through pickling, ``(PREMUL_SUM, factor)``."""
    factor = getattr(op, "factor", None)
    if factor is None and hasattr(op, "__getstate__"):
        state = op.__getstate__()
        if isinstance(state, tuple) and len(state) > 1:
            factor = state[1]
    return factor


def _param_groups(state):
    """An FSDP2 state's parameter groups: torch 2.15 keeps a list (``_fsdp_param_groups``),
    torch 2.11 at most one (``_fsdp_param_group``)."""
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is not None:
        return list(groups)
    one = getattr(state, "_fsdp_param_group", None)
    return [one] if one is not None else []


def backward_gather_groups(model):
    """The process groups (this rank's, distinct, in module order) that FSDP2's backward
    all-gathers of `model` run on: for each FSDP module that reshards after forward, its
    post-forward shard group (hpZ: the node's ranks; ``reshard_after_forward=True``: the shard
    group itself). Call it after the first forward: FSDP2 settles the root module's resharding
    at its lazy init. With :func:`zcoll.get_stats` / :func:`zcoll.reset_stats` it measures what
    the backward gathers move (python/README.md, "Byte counters")."""
    groups = {}
    for m in _fsdp_modules(model):
        for pg_ in _param_groups(m._get_fsdp_state()):
            post = pg_.post_forward_mesh_info
            if post is None:  # kept unsharded after forward: no backward gather
                continue
            group = post.shard_process_group
            groups.setdefault(group.group_name, group)
    return list(groups.values())


def _check_hpz(module):
    state = module._get_fsdp_state()
    for pg_ in _param_groups(state):
        post = pg_.post_forward_mesh_info
        if post is None:  # reshard_after_forward=False: no backward gather at all
            continue
        shard_group = pg_.mesh_info.shard_process_group
        per_node = ranks_per_node(shard_group)
        if post.shard_mesh_size != per_node and not (
                post is pg_.mesh_info and shard_group.size() == per_node):
            raise ValueError(
                f"zcoll.fsdp.zeropp: hpZ needs {type(module).__name__} wrapped with "
                f"fully_shard(..., reshard_after_forward={per_node}) (ranks per node: the "
                f"backward all-gather then stays on the node); it reshards to "
                f"{post.shard_mesh_size} ranks. Wrap with zcoll.fsdp.ranks_per_node(), or "
                f"pass hpz=False.")


class QuantizedReplicateAllReduce:
    """HSDP's replicate-dimension gradient all-reduce through zcoll's quantized all-reduce, as
    the hook of torch's ``FSDPModule.set_all_reduce_hook`` (``hook(reduce_output)``): averages
    FSDP's reduce-scatter output (this rank's gradient shard, already reduced over the shard
    group) in place over `replicate_group` (AVG), with error feedback in one residual kept here
    (made anew if the shard's size changes). float64 or other dtypes zcoll does not quantize go
    through the exact all-reduce. ``calls`` counts the all-reduces run."""

    def __init__(self, replicate_group, *, bits=8, intra_bits=8, block_size=None,
                 error_feedback=True):
        for name, value, ok in (("bits", bits, (4, 8)), ("intra_bits", intra_bits, (4, 8, 16))):
            if value not in ok:
                raise ValueError(f"zcoll.fsdp: QuantizedReplicateAllReduce {name}={value!r} is "
                                 f"not {', '.join(map(str, ok[:-1]))} or {ok[-1]}")
        _zpp.zcoll_backend(replicate_group, "QuantizedReplicateAllReduce")
        self.group = replicate_group
        self.quant = {"bits": bits, "intra_bits": intra_bits, "block_size": block_size}
        self.error_feedback = error_feedback
        self.residual = None
        self._made_for = None  # (numel, device) the residual was made for
        self.calls = 0

    def _residual_for(self, tensor):
        if not self.error_feedback:
            return None
        if self._made_for != (tensor.numel(), tensor.device):
            self.residual = _zpp.new_residual(tensor, self.group, dtype=torch.float32,
                                              **self.quant)
            self._made_for = (tensor.numel(), tensor.device)
        return self.residual

    def __call__(self, reduce_output):
        self.calls += 1
        if reduce_output.dtype not in _QUANTIZABLE:
            dist.all_reduce(reduce_output, op=dist.ReduceOp.AVG, group=self.group)
            return
        _zpp.quantized_all_reduce(reduce_output, self.group, dist.ReduceOp.AVG,
                                  residual=self._residual_for(reduce_output), **self.quant)


def quantized_replicate_all_reduce(model, replicate_group, **kwargs):
    """HSDP with a quantized replicate all-reduce: `model` is wrapped with fully_shard on the
    shard dimension only (``mesh=mesh["shard"]``, a 1-D mesh), and this sets a
    :class:`QuantizedReplicateAllReduce` over `replicate_group` (``mesh["replicate"].get_group()``)
    on each of its FSDP modules, one per module (each keeps its own residual); returns them.
    torch's native HSDP (a 2-D mesh) all-reduces with dist.all_reduce inside FSDP, and its
    set_all_reduce_hook runs after that all-reduce, so it cannot be replaced there: such a model
    is refused (ValueError). kwargs: QuantizedReplicateAllReduce's (bits, intra_bits,
    block_size, error_feedback)."""
    hooks = []
    for m in _fsdp_modules(model):
        if any(getattr(pg_, "_is_hsdp", False) for pg_ in _param_groups(m._get_fsdp_state())):
            raise ValueError(
                f"zcoll.fsdp.quantized_replicate_all_reduce: {type(m).__name__} is wrapped on a "
                f"2-D (HSDP) mesh, whose replicate all-reduce FSDP runs itself; wrap with "
                f"fully_shard(..., mesh=mesh['shard']) and pass mesh['replicate'].get_group()")
        hook = QuantizedReplicateAllReduce(replicate_group, **kwargs)
        m.set_all_reduce_hook(hook)
        hooks.append(hook)
    if not hooks:
        raise ValueError("zcoll.fsdp.quantized_replicate_all_reduce: the model has no FSDP "
                         "module: wrap it with fully_shard(..., mesh=mesh['shard']) first")
    return hooks
