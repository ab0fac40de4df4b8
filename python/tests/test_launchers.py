"""dist.init_process_group("zcoll") without importing zcoll (torch loads it through the
torch.distributed.backends entry point), under torchrun and with an explicit store."""
import os
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch_features import BACKEND_ENTRY_POINTS, BACKEND_ENTRY_POINTS_WHY

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

SCRIPT = textwrap.dedent("""
    import torch, torch.distributed as dist
    dist.init_process_group("zcoll")   # no `import zcoll`: the entry point registers it
    t = torch.full((4,), float(dist.get_rank() + 1))
    dist.all_reduce(t)
    assert torch.all(t == sum(range(1, dist.get_world_size() + 1))), t
    assert dist.get_backend() == "zcoll"
    dist.destroy_process_group()
    print("ok", flush=True)
""")


@pytest.mark.skipif(not BACKEND_ENTRY_POINTS, reason=BACKEND_ENTRY_POINTS_WHY)
def test_torchrun_without_import(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-port", "29681", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("ok") == 2, out.stdout


def _explicit_store_worker(rank, world, port):
    if not BACKEND_ENTRY_POINTS:
        import zcoll  # noqa: F401  (torch 2.11 loads no c10d backend by name)
    store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0,
                          timeout=timedelta(seconds=60))
    dist.init_process_group("zcoll", store=store, rank=rank, world_size=world)
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert t.item() == world - 1
    dist.destroy_process_group()


def test_explicit_store_and_spawn():
    mp.start_processes(_explicit_store_worker, args=(3, 29691), nprocs=3, join=True,
                       start_method="spawn")


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZCOLLRUN = os.path.join(ROOT, "tools", "zcollrun")

NODES_SCRIPT = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    import zcoll.zeropp                # (torch 2.11 loads no backend by name without it)
    dist.init_process_group("zcoll")   # env://: zcollrun sets MASTER_ADDR / MASTER_PORT
    nodes = zcoll.zeropp.zcoll_backend().node_count()
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.all(t == dist.get_world_size()), t
    print(f"nodes={nodes} port={os.environ['MASTER_PORT']}", flush=True)
    dist.destroy_process_group()
""")


def test_zcollrun_emulated_nodes_under_torch(tmp_path):
    """tools/zcollrun --nodes 2 runs a torch program (before: no MASTER_ADDR/MASTER_PORT)."""
    script = tmp_path / "nodes.py"
    script.write_text(NODES_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    out = subprocess.run([sys.executable, ZCOLLRUN, "-n", "2", "--nodes", "2", "--timeout", "120",
                          sys.executable, str(script)],
                         env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("nodes=2") == 2, out.stdout


def test_zcollrun_keeps_a_given_master_port(tmp_path):
    script = tmp_path / "nodes.py"
    script.write_text(NODES_SCRIPT)
    out = subprocess.run([sys.executable, ZCOLLRUN, "-n", "2", "--timeout", "120",
                          "-x", "MASTER_PORT=29733", sys.executable, str(script)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("nodes=1 port=29733") == 2, out.stdout
