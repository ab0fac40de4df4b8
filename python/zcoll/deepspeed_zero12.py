"""DeepSpeed ZeRO stage 1 and 2 on zcoll's quantized collectives (installed by
``zcoll.deepspeed.enable()``; see its docstring and python/README.md, DeepSpeed).

DeepSpeed's ``DeepSpeedZeroOptimizer`` (runtime/zero/stage_1_and_2.py) keeps the whole model on
every rank and moves it twice per step:

- gradients: every bucket of gradients goes through ``allreduce_bucket`` (or, with
  ``reduce_scatter: false``, ``gradient_reduction_w_predivide``), which divides it by the world
  size and calls ``dist.all_reduce``; with ``reduce_scatter: true`` (the default) each rank then
  keeps only its partition's slices, but the wire operation is still an all-reduce. With
  ``zero_quantized_gradients`` that all-reduce becomes zcoll's quantized all-reduce
  (``zcollQuantizedAllReduce``, Sum after DeepSpeed's own division, so the scaling is
  DeepSpeed's); with ``enable(allreduce_error_feedback=True)`` the n-th all-reduce of a step
  keeps its residual for the n-th all-reduce of the next step (DeepSpeed fills its buckets in
  the backward pass's order, the same every step for a model whose graph does not change);
- weights: after the optimizer step each rank copies its updated fp32 partition into the model
  dtype and ``all_gather_dp_groups`` gathers the partitions into the flat model buffer. With
  ``zero_quantized_weights`` that gather becomes zcoll's qwZ (``zcollQuantizedAllGather``, in
  place): every rank, the partition's owner included, ends with the dequantized codes, so all
  replicas hold identical bits. The fp32 master partition each rank updates stays exact, and
  so does the gather of ``update_lp_params`` (after a checkpoint is loaded).

Only the engine whose config asks for it is changed (its optimizer's methods, and the gather of
its step); the others run DeepSpeed's code unchanged. Configurations DeepSpeed would route past
these two points are refused with a ValueError naming the setting (:func:`refusal`).
"""
import weakref

import torch

from . import zeropp

QUANTIZABLE = (torch.float32, torch.float16, torch.bfloat16)


def _zero_config(engine):
    return engine._config.zero_config


def refusal(engine):
    """Why zcoll cannot honour this ZeRO-1/2 engine's ZeRO++ settings ("" when it can)."""
    zero = _zero_config(engine)
    stage = engine.zero_optimization_stage()
    weights, grads = zero.zero_quantized_weights, zero.zero_quantized_gradients
    if zero.zero_hpz_partition_size > 1:
        return (f"zero_hpz_partition_size={zero.zero_hpz_partition_size} is ZeRO stage 3's "
                f"secondary weight partition; ZeRO stage {stage} keeps the whole model on every "
                f"rank and has no such gather. Set it to 1 (or use stage 3).")
    if zero.zero_quantized_nontrainable_weights:
        return (f"zero_quantized_nontrainable_weights is ZeRO stage 3's (it stores frozen "
                f"weights quantized); ZeRO stage {stage} does not partition weights. Use "
                f"zero_quantized_weights for the weight all-gather.")
    if not (weights or grads):
        return ""
    names = " and ".join(n for n, on in (("zero_quantized_weights", weights),
                                         ("zero_quantized_gradients", grads)) if on)
    if getattr(engine, "zenflow", False):
        return f"{names} with ZenFlow (zenflow): its optimizer moves gradients its own way."
    if engine.pipeline_parallelism:
        return f"{names} with pipeline parallelism: not supported by zcoll.deepspeed."
    if engine.has_moe_layers:
        return f"{names} with MoE layers (expert data-parallel groups): not supported."
    if getattr(engine, "is_deepcompile_enabled", lambda: False)():
        return f"{names} with DeepCompile, which compiles its own gradient reduction."
    if grads and zero.reduce_scatter and not zero.use_multi_rank_bucket_allreduce:
        return ("zero_quantized_gradients with use_multi_rank_bucket_allreduce: false: DeepSpeed "
                "then reduces each slice to its owner with dist.reduce, which zcoll has no "
                "quantized form of. Leave use_multi_rank_bucket_allreduce at true (the default: "
                "one all-reduce per bucket, which zcoll quantizes).")
    return ""


class _Quantizing:
    """While an optimizer's gradient reduction runs, its dist.all_reduce calls are the ones to
    quantize (stage_1_and_2's module-level ``dist`` is a _CommProxy that asks this)."""
    active = None  # the ZeroQuantization whose gradient reduction is running


class _CommProxy:
    """deepspeed.comm for stage_1_and_2.py: everything as DeepSpeed's, except that all_reduce
    inside a quantized engine's gradient reduction runs zcoll's quantized all-reduce."""

    def __init__(self, comm):
        self._comm = comm

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def all_reduce(self, tensor, op=None, group=None, async_op=False, **kwargs):
        state = _Quantizing.active
        if state is None:
            if op is None:
                return self._comm.all_reduce(tensor, group=group, async_op=async_op, **kwargs)
            return self._comm.all_reduce(tensor, op=op, group=group, async_op=async_op, **kwargs)
        return state.all_reduce(tensor, op, group, async_op)


def install_comm_proxy():
    """Makes stage_1_and_2.py's ``dist`` the proxy (once)."""
    from deepspeed.runtime.zero import stage_1_and_2
    if not isinstance(stage_1_and_2.dist, _CommProxy):
        stage_1_and_2.dist = _CommProxy(stage_1_and_2.dist)


class ZeroQuantization:
    """zcoll's quantized collectives attached to one ZeRO-1/2 optimizer (DeepSpeedZeroOptimizer)
    whose engine config asks for them; `settings` is zcoll.deepspeed's Settings."""

    def __init__(self, optimizer, settings, weights, grads):
        self.optimizer = optimizer
        self.settings = settings
        self.weights = weights
        self.grads = grads
        self.stepping = False
        self.reduced = 0  # gradient all-reduces since the last step
        self.residuals = []  # error feedback: (layout, fp32 buffer) per all-reduce of a step
        self.residuals_made = 0  # how many were made (zeroed), all-reduces whose layout changed
        for group in self._groups():
            zeropp.zcoll_backend(group, f"{self._names()} (ZeRO stage 1/2's data-parallel group)")

    def _names(self):
        return " and ".join(n for n, on in (("zero_quantized_weights", self.weights),
                                            ("zero_quantized_gradients", self.grads)) if on)

    def _groups(self):
        groups = list(self.optimizer.real_dp_process_group) if self.weights else []
        if self.grads:
            groups.append(self.optimizer.dp_process_group)
        return groups

    # ---- gradients ----
    def all_reduce(self, tensor, op, group, async_op):
        """The all_reduce of DeepSpeed's gradient reduction, quantized (Sum: DeepSpeed divided
        the bucket before calling it, or scales it after)."""
        if op is not None and getattr(op, "name", str(op)).split(".")[-1] != "SUM":
            raise ValueError(f"zcoll.deepspeed: zero_quantized_gradients: DeepSpeed asked for a "
                             f"{op} all-reduce of gradients; only SUM is quantized")
        if tensor.dtype not in QUANTIZABLE:
            raise TypeError(f"zcoll.deepspeed: zero_quantized_gradients quantizes gradients "
                            f"communicated in torch.float32, torch.float16 or torch.bfloat16, "
                            f"got {tensor.dtype} (DeepSpeed's communication_data_type)")
        s = self.settings
        s.calls["allreduce"] += 1
        quant = {"bits": s.allreduce_bits, "intra_bits": s.allreduce_intra_bits,
                 "block_size": s.grad_block_size}
        residual = self._residual(tensor, group, quant) if s.allreduce_error_feedback else None
        return zeropp.quantized_all_reduce(tensor, group, torch.distributed.ReduceOp.SUM,
                                           residual=residual, async_op=async_op, **quant)

    def _residual(self, tensor, group, quant):
        """Error feedback: the residual of this step's n-th all-reduce (DeepSpeed reduces the
        same buckets in the same order every step), made anew (zeroed) when its size, dtype,
        group or widths differ from the last step's n-th."""
        index = self.reduced
        self.reduced += 1
        layout = (tensor.numel(), tensor.dtype, tensor.device, id(group), tuple(quant.values()))
        if index >= len(self.residuals):
            self.residuals.append(None)
        if self.residuals[index] is None or self.residuals[index][0] != layout:
            buffer = zeropp.new_residual(tensor, group, dtype=torch.float32, **quant)
            self.residuals[index] = (layout, buffer)
            self.residuals_made += 1
        return self.residuals[index][1]

    def quantizing(self, method):
        """`method` of the optimizer, with its all_reduce calls quantized."""
        def reduce(*args, **kwargs):
            outer, _Quantizing.active = _Quantizing.active, self
            try:
                return method(*args, **kwargs)
            finally:
                _Quantizing.active = outer
        return reduce

    # ---- weights ----
    def stepping_then(self, step):
        """The optimizer's step, during which all_gather_dp_groups is quantized (with
        zero_quantized_weights), and after which the next all-reduce is the step's first."""
        def quantized_step(*args, **kwargs):
            self.stepping = self.weights
            try:
                return step(*args, **kwargs)
            finally:
                self.stepping = False
                self.reduced = 0
        return quantized_step

    def gather(self, groups_flat, partitioned_param_groups, dp_process_group):
        """qwZ in place: each group's flat buffer from its partitions, the own one included."""
        for flat, partitions, group in zip(groups_flat, partitioned_param_groups,
                                           dp_process_group):
            world = torch.distributed.get_world_size(group)
            if world == 1:
                continue
            rank = torch.distributed.get_rank(group)
            mine = partitions[rank]
            if any(p.numel() != mine.numel() for p in partitions) or \
                    flat.numel() != mine.numel() * world:
                raise ValueError(f"zcoll.deepspeed: zero_quantized_weights: DeepSpeed's "
                                 f"partitions of {flat.numel()} elements are not {world} equal "
                                 f"parts; qwZ gathers equal shards")
            if flat.dtype not in QUANTIZABLE:
                raise TypeError(f"zcoll.deepspeed: zero_quantized_weights quantizes "
                                f"torch.float32, torch.float16 or torch.bfloat16 weights, got "
                                f"{flat.dtype}")
            self.settings.calls["qwz"] += 1
            zeropp.quantized_all_gather(flat, mine, group, bits=self.settings.weight_bits,
                                        block_size=self.settings.weight_block_size)


# id(optimizer.bit16_groups_flat) -> its ZeroQuantization, as long as the optimizer lives
_attached = weakref.WeakValueDictionary()


def attach(optimizer, settings, weights, grads):
    """Makes `optimizer` (a DeepSpeedZeroOptimizer) quantize what its engine's config asks;
    the state is also ``optimizer.zcoll_quantization`` (its ``residuals``: error feedback)."""
    state = ZeroQuantization(optimizer, settings, weights, grads)
    optimizer.zcoll_quantization = state
    if grads:
        for name in ("allreduce_bucket", "gradient_reduction_w_predivide"):
            setattr(optimizer, name, state.quantizing(getattr(optimizer, name)))
    optimizer.step = state.stepping_then(optimizer.step)
    if weights:
        _attached[id(optimizer.bit16_groups_flat)] = state
    return state


def all_gather_dp_groups(original):
    """stage_1_and_2's all_gather_dp_groups: qwZ for the step of an attached optimizer,
    DeepSpeed's own otherwise (other engines, update_lp_params after a checkpoint load)."""
    def gather(groups_flat, partitioned_param_groups, dp_process_group, start_alignment_factor,
               allgather_bucket_size):
        state = _attached.get(id(groups_flat))
        if state is None or state.optimizer.bit16_groups_flat is not groups_flat or \
                not state.stepping:
            return original(groups_flat, partitioned_param_groups, dp_process_group,
                            start_alignment_factor, allgather_bucket_size)
        return state.gather(groups_flat, partitioned_param_groups, dp_process_group)
    gather.zcoll_wrapped = True
    return gather


def configure_zero_optimizer(original, settings):
    """DeepSpeedEngine._configure_zero_optimizer, which for stages 1 and 2 refuses what zcoll
    cannot honour (before building the optimizer) and attaches zcoll's collectives after."""
    def configure(engine, optimizer):
        stage = engine.zero_optimization_stage()
        if stage not in (1, 2):
            return original(engine, optimizer)
        why = refusal(engine)
        if why:
            raise ValueError(f"zcoll.deepspeed (ZeRO stage {stage}): {why}")
        zero = _zero_config(engine)
        weights, grads = zero.zero_quantized_weights, zero.zero_quantized_gradients
        result = original(engine, optimizer)
        if weights or grads:
            attach(result, settings, weights, grads)
        return result
    configure.zcoll_wrapped = True
    return configure
