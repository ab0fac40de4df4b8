"""DeepSpeed ZeRO-3 on CPU: the zcoll backend gives the same losses as gloo.

Runs perf/zero_train/ds_train.py (byte-level LM, ZeRO stage 3, 2 ranks on 2 emulated nodes,
4 steps) once with dist_backend="gloo" and once with "zcoll"; the losses must match to fp32
summation-order noise and must fall. Skipped, with the reason, where deepspeed or the zcoll
backend cannot be imported.
"""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "perf", "zero_train"))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                reason="deepspeed is not installed")


def _losses(backend, port):
    import ds_train
    args = ds_train.parser().parse_args(["--backend", backend, "--world", "2", "--local", "1",
                                         "--steps", "4", "--port", str(port)])
    return ds_train.run(args)


def test_gloo_zero3_trains():
    losses = _losses("gloo", 29631)
    assert len(losses) == 4
    assert losses[-1] < losses[0] - 0.3, losses


def test_zcoll_zero3_matches_gloo():
    pytest.importorskip("zcoll", reason="the zcoll torch backend is not built")
    ref = _losses("gloo", 29641)
    got = _losses("zcoll", 29651)
    assert got == pytest.approx(ref, rel=1e-5, abs=1e-5)
