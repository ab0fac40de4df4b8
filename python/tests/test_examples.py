"""The examples in python/examples run as their docstrings say (so they do not rot)."""
import os
import subprocess
import sys

import pytest
import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not hasattr(dist, "shrink_group"),
                    reason="this torch has no dist.shrink_group (keep_training.py needs it)")
def test_keep_training_goes_on_after_a_rank_dies(tmp_path):
    env = dict(os.environ, UCX_NET_DEVICES="lo", ZCOLL_SOCKET_IFNAME="lo")
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "zcollrun"), "--keep-going", "--timeout",
         "120", "-n", "3", sys.executable, os.path.join(ROOT, "python", "examples",
                                                        "keep_training.py"),
         "--victim", "1", "--kill-step", "4", "--steps", "12", "--alive-dir", str(tmp_path),
         "--alive-wait", "3"],  # generous: survivors may see the death apart on a loaded machine
        env=env, capture_output=True, text=True, timeout=180)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text  # the victim's exit code; the others finished
    assert "ranks [1] gone" in text and "2 ranks go on" in text, text
    assert "done: 12 steps, 2 replicas identical" in text, text


@pytest.mark.skipif(not hasattr(dist, "shrink_group"),
                    reason="this torch has no dist.shrink_group (keep_training_zeropp.py needs it)")
def test_keep_training_zeropp_rebuilds_the_dead_ranks_shards(tmp_path):
    env = dict(os.environ, UCX_NET_DEVICES="lo", ZCOLL_SOCKET_IFNAME="lo")
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "zcollrun"), "--keep-going", "--timeout",
         "120", "-n", "4", "--nodes", "2", sys.executable,
         os.path.join(ROOT, "python", "examples", "keep_training_zeropp.py"),
         "--victim", "2", "--kill-step", "5", "--steps", "12", "--alive-dir", str(tmp_path),
         "--alive-wait", "3"],
        env=env, capture_output=True, text=True, timeout=180)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text  # the victim's exit code; the others finished
    assert "ranks [2] gone" in text, text
    assert "rebuilt over 3 ranks" in text and "bit-identical" in text, text
    assert "on 3 ranks (qwZ, uneven nodes)" in text, text
    assert "done: 12 steps, 3 ranks" in text, text
