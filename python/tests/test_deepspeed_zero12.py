"""DeepSpeed ZeRO stage 1 and 2 with zero_quantized_weights and zero_quantized_gradients run on
zcoll's qwZ and quantized all-reduce through zcoll.deepspeed.enable().

One launch of perf/zero_train/ds_zero12.py (4 ranks on 2 emulated nodes, a byte-level LM of
268416 fp32 parameters, 4 steps per run) trains per stage: DeepSpeed untouched, enable() with
the options off, enable() with them on (also through DeepSpeed's other gradient paths, with
offload_optimizer, in bf16, and with error feedback), and tries two configurations enable()
refuses. Asserted here:
- options off: the losses, and the bytes moved, equal the untouched run exactly;
- options on: zcoll's calls carry the traffic (one qwZ gather and one quantized all-reduce per
  step), inter-node bytes of the weight gather <= 0.55x and of the gradient all-reduce <= 0.35x
  of the untouched run (measured 0.381x and 0.212x), the losses within 1% of the untouched run
  at every step (measured: 0.11% at most), every rank holds bit-identical parameters after
  every step, and the owner's partition is the dequantized codes (not its fp32 master, which
  it is in the exact run);
- error feedback: one residual per bucket, made once and reused every step, of zcoll's size;
- the refused configurations raise ValueError naming the setting (and, without a launch, the
  message of every refusal, the configurations not refused, a data-parallel group on gloo).
Skipped, with the reason, where deepspeed or the zcoll backend cannot be imported.
"""
import importlib.util
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "perf", "zero_train"))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                reason="deepspeed is not installed")

STAGES = (1, 2)
LOSS_RTOL = 0.01


@pytest.fixture(scope="module")
def runs():
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    import ds_zero12
    return ds_zero12.run(ds_zero12.parser().parse_args(["--world", "4", "--local", "2",
                                                        "--steps", "4", "--port", "29731"]))


def _quantized_runs(runs, stage):
    return {name: run for name, run in runs.items() if name.startswith(f"on{stage}")}


@pytest.mark.parametrize("stage", STAGES)
def test_options_off_equal_deepspeed_untouched(runs, stage):
    plain, off = runs[f"plain{stage}"], runs[f"off{stage}"]
    assert off == plain
    assert len(plain["losses"]) == 4 and plain["losses"][-1] < plain["losses"][0] - 1.0, plain
    assert all(plain["identical"]) and all(plain["owner_exact"]), plain


@pytest.mark.parametrize("stage", STAGES)
def test_options_on_run_on_zcolls_quantized_calls(runs, stage):
    plain = runs[f"plain{stage}"]
    for name, run in _quantized_runs(runs, stage).items():
        assert run["calls"] == {"qwz": 4, "qgz": 0, "allreduce": 4}, (name, run)
        assert run["step_inter_bytes"] <= 0.55 * plain["step_inter_bytes"], (name, run, plain)
        assert run["grad_inter_bytes"] <= 0.35 * plain["grad_inter_bytes"], (name, run, plain)


@pytest.mark.parametrize("stage", STAGES)
def test_options_on_keep_replicas_identical_and_train(runs, stage):
    plain = runs[f"plain{stage}"]
    for name, run in _quantized_runs(runs, stage).items():
        assert all(run["identical"]), (name, run)
        assert not any(run["owner_exact"]), (name, run)  # the owner holds the codes too
        assert run["losses"] == pytest.approx(plain["losses"], rel=LOSS_RTOL), (name, run, plain)


@pytest.mark.parametrize("stage", STAGES)
def test_error_feedback_keeps_one_residual_per_bucket(runs, stage):
    """enable(allreduce_error_feedback=True): the run's one bucket gets one residual, made once
    and used by all 4 steps, of zcoll's size 4*C*(W+N+1) bytes (C = numel // W; W 4, N 2), and
    written by the calls; without it none is made."""
    run = runs[f"on{stage}_error_feedback"]
    assert run["residuals_made"] == 1, run
    assert run["residual_bytes"] == 4 * (run["params"] // 4) * (4 + 2 + 1), run
    assert run["residual_written"], run
    assert runs[f"on{stage}"]["residual_bytes"] == 0


def test_unsupported_configurations_are_refused(runs):
    import ds_zero12
    assert len(runs["refused"]) == len(ds_zero12.REFUSED)
    for message, (config, word) in zip(runs["refused"], ds_zero12.REFUSED):
        assert message.startswith("zcoll.deepspeed (ZeRO stage 2): ") and word in message, \
            (config, message)


def _engine(stage=2, **zero):
    """What refusal() reads of a DeepSpeedEngine, with DeepSpeed's defaults."""
    from types import SimpleNamespace
    config = {"zero_quantized_weights": False, "zero_quantized_gradients": False,
              "zero_hpz_partition_size": 1, "zero_quantized_nontrainable_weights": False,
              "reduce_scatter": True, "use_multi_rank_bucket_allreduce": True}
    engine = {"zenflow": False, "pipeline_parallelism": False, "has_moe_layers": False,
              "deepcompile": False}
    for key in list(zero):
        if key in engine:
            engine[key] = zero.pop(key)
    config.update(zero)
    deepcompile = engine.pop("deepcompile")
    return SimpleNamespace(_config=SimpleNamespace(zero_config=SimpleNamespace(**config)),
                           zero_optimization_stage=lambda: stage,
                           is_deepcompile_enabled=lambda: deepcompile, **engine)


@pytest.mark.parametrize("zero, words", [
    ({"zero_hpz_partition_size": 2}, "zero_hpz_partition_size=2 is ZeRO stage 3's"),
    ({"zero_quantized_nontrainable_weights": True}, "zero_quantized_nontrainable_weights is"),
    ({"zero_quantized_gradients": True, "use_multi_rank_bucket_allreduce": False},
     "zero_quantized_gradients with use_multi_rank_bucket_allreduce: false"),
    ({"zero_quantized_weights": True, "zenflow": True}, "zero_quantized_weights with ZenFlow"),
    ({"zero_quantized_gradients": True, "pipeline_parallelism": True},
     "zero_quantized_gradients with pipeline parallelism"),
    ({"zero_quantized_weights": True, "zero_quantized_gradients": True, "has_moe_layers": True},
     "zero_quantized_weights and zero_quantized_gradients with MoE layers"),
    ({"zero_quantized_gradients": True, "deepcompile": True},
     "zero_quantized_gradients with DeepCompile"),
])
def test_refusal_names_the_setting(zero, words):
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    from zcoll import deepspeed_zero12
    assert words in deepspeed_zero12.refusal(_engine(**zero))


@pytest.mark.parametrize("zero", [
    {}, {"zero_quantized_weights": True}, {"zero_quantized_gradients": True},
    # DeepSpeed reduces with dist.reduce only with reduce_scatter on; off, it all-reduces.
    {"zero_quantized_gradients": True, "reduce_scatter": False,
     "use_multi_rank_bucket_allreduce": False},
    {"zero_quantized_weights": True, "use_multi_rank_bucket_allreduce": False},
    {"zenflow": True}, {"has_moe_layers": True}])  # options off: nothing to refuse
def test_supported_configurations_are_not_refused(zero):
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    from zcoll import deepspeed_zero12
    assert deepspeed_zero12.refusal(_engine(**zero)) == ""


GLOO_GROUP = """
import os, types, torch.distributed as dist
from zcoll import deepspeed, deepspeed_zero12
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29741", rank=0, world_size=1)
opt = types.SimpleNamespace(real_dp_process_group=[dist.group.WORLD],
                            dp_process_group=dist.group.WORLD)
try:
    deepspeed_zero12.ZeroQuantization(opt, deepspeed.Settings(), True, False)
except ValueError as err:
    print("REFUSED", err)
dist.destroy_process_group()
"""


def test_a_data_parallel_group_not_on_zcoll_is_refused():
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    import subprocess
    out = subprocess.run([sys.executable, "-c", GLOO_GROUP], capture_output=True, text=True,
                         timeout=120)
    assert "REFUSED zcoll: zero_quantized_weights (ZeRO stage 1/2's data-parallel group) runs " \
           "on a process group of the zcoll backend; this group runs on gloo" in out.stdout, \
        (out.stdout, out.stderr)


@pytest.mark.parametrize("argument, message", [
    ({"allreduce_bits": 3}, "allreduce_bits=3 is not 4 or 8"),
    ({"allreduce_intra_bits": 16}, "allreduce_intra_bits=16 is not 4 or 8"),
    ({"grad_block_size": 100}, "grad_block_size=100 is not a multiple of 32 in [32, 4096]")])
def test_enable_refuses_bad_widths_before_replacing_anything(argument, message):
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    import zcoll.deepspeed
    before = zcoll.deepspeed._settings  # None unless a test of this process enabled it
    snapshot = None if before is None else dict(vars(before))
    with pytest.raises(ValueError, match=re.escape(message)):
        zcoll.deepspeed.enable(**argument)
    assert zcoll.deepspeed._settings is before
    assert snapshot is None or vars(before) == snapshot
