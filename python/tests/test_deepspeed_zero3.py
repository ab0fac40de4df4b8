"""DeepSpeed on CPU over zcoll: ZeRO-3 gives the same losses as gloo; ZeRO++'s options run on
zcoll's qwZ / qgZ through zcoll.deepspeed.enable() and train within 2% of ZeRO-3.

Runs perf/zero_train/ds_train.py (byte-level LM, ZeRO stage 3, 4 steps) once with
dist_backend="gloo" and once with "zcoll": on 2 ranks the losses must be bit-identical (a sum of
two values is rounded once, in whatever order); on 3 ranks zcoll sums in its own fixed order, not
gloo's, so they must match to fp32 summation-order noise (1e-6 relative). Skipped, with the
reason, where deepspeed or the zcoll backend cannot be imported.
"""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "perf", "zero_train"))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                reason="deepspeed is not installed")


def _losses(backend, port, world=2):
    import ds_train
    args = ds_train.parser().parse_args(["--backend", backend, "--world", str(world), "--local",
                                         "1", "--steps", "4", "--port", str(port)])
    return ds_train.run(args)


def test_gloo_zero3_trains():
    losses = _losses("gloo", 29631)
    assert len(losses) == 4
    assert losses[-1] < losses[0] - 0.3, losses


def test_zcoll_zero3_matches_gloo_bit_for_bit_on_2_ranks():
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    ref = _losses("gloo", 29641)
    got = _losses("zcoll", 29651)
    assert got == ref


def test_zcoll_zero3_matches_gloo_to_rounding_on_3_ranks():
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    ref = _losses("gloo", 29642, world=3)
    got = _losses("zcoll", 29652, world=3)
    assert got == pytest.approx(ref, rel=1e-6, abs=0)


def _run(argv):
    import ds_train
    return ds_train.run(ds_train.parser().parse_args(argv))


def test_zcoll_zeropp_runs_deepspeed_options_on_zcoll():
    """zero_quantized_weights + zero_hpz_partition_size + zero_quantized_gradients on 4 ranks /
    2 emulated nodes through zcoll.deepspeed.enable(): zcoll's qwZ and qgZ carry the traffic,
    and the losses stay within 2% of ZeRO-3's (exact, gloo)."""
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    common = ["--world", "4", "--local", "2", "--steps", "4"]
    ref = _run(["--backend", "gloo", "--port", "29661"] + common)
    got = _run(["--backend", "zcoll", "--zeropp", "--port", "29671"] + common)
    assert got["zeropp_calls"]["qwz"] > 0 and got["zeropp_calls"]["qgz"] > 0, got
    assert got["losses"][-1] < got["losses"][0] - 0.3, got
    assert got["losses"] == pytest.approx(ref, rel=0.02), (got, ref)


def test_zeropp_adapter_refuses_untested_deepspeed(monkeypatch):
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    import deepspeed
    import zcoll.deepspeed
    monkeypatch.setattr(deepspeed, "__version__", "0.14.0")
    with pytest.raises(RuntimeError, match="tested with deepspeed"):
        zcoll.deepspeed.enable()
