"""What a torch user meets around the collectives themselves (issue 34): debug mode
(TORCH_DISTRIBUTED_DEBUG=DETAIL), which timeout bounds zcoll's waits, the messages of failures,
Work.wait(timeout), the all_gather_hier op's registered work, DeepSpeed's ZeRO++ options without
zcoll.deepspeed.enable(), and installing without torch in the build environment."""
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)


def _worker(rank, world, path, scenario, env, timeout_s):
    for key, value in env.items():  # None unsets; "{rank}" is replaced by the rank
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value.format(rank=rank)
    if "TORCH_DISTRIBUTED_DEBUG" in env:
        dist.set_debug_level_from_env()
    import zcoll  # noqa: F401
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))
    SCENARIOS[scenario](rank, world)
    dist.destroy_process_group()


def _run(scenario, world=2, env=None, timeout_s=60):
    env = dict(env or {})
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(world, os.path.join(d, "store"), scenario, env,
                                          timeout_s),
                           nprocs=world, join=True, start_method="fork")


# ---- TORCH_DISTRIBUTED_DEBUG=DETAIL -----------------------------------------------------------

def scenario_debug_detail(rank, world):
    from torch._C._distributed_c10d import _ProcessGroupWrapper
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    assert isinstance(backend, _ProcessGroupWrapper), type(backend)
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.all(t == sum(range(1, world + 1)))
    out = torch.empty(3 * world)
    dist.all_gather_into_tensor(out, torch.full((3,), float(rank)))
    assert torch.equal(out, torch.arange(world).repeat_interleave(3).float())
    shard = torch.empty(2)
    dist.reduce_scatter_tensor(shard, torch.ones(2 * world))
    assert torch.all(shard == world)
    b = torch.full((5,), float(rank))
    dist.broadcast(b, src=world - 1)
    assert torch.all(b == world - 1)
    outs = [torch.empty(2) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank)))
    assert [o[0].item() for o in outs] == list(range(world))
    dist.barrier()
    a = torch.empty(world)
    dist.all_to_all_single(a, torch.full((world,), float(rank)))
    assert torch.equal(a, torch.arange(world).float())
    peer = (rank + 1) % world
    got = torch.empty(2)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((2,), float(rank)), peer),
                                   dist.P2POp(dist.irecv, got, (rank - 1) % world)])
    for r in reqs:
        r.wait()
    assert torch.all(got == (rank - 1) % world)
    # The ZeRO++ functions reach zcoll through the wrapper.
    import zcoll.zeropp as zpp
    full = torch.empty(8 * world)
    zpp.all_gather_hier(full, torch.full((8,), float(rank)), quantized=False)
    assert torch.equal(full, torch.arange(world).repeat_interleave(8).float())
    # The wrapper's checks work: mismatched shapes are reported on every rank.
    with pytest.raises(RuntimeError, match="[Mm]ismatch"):
        dist.all_reduce(torch.ones(4 + rank))
    dist.all_reduce(t)  # and the group stays usable


def test_debug_detail_wraps_zcoll():
    _run("debug_detail", env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})


# ---- ZCOLL_TIMEOUT and torch's timeout ----------------------------------------------------------

@pytest.mark.parametrize("text,seconds", [("60", 60), (" 45", 45), ("0x10", 16), ("010", 8),
                                          ("+7", 7)])
def test_zcoll_timeout_parsed_as_c_does(monkeypatch, text, seconds):
    import zcoll
    monkeypatch.setenv("ZCOLL_TIMEOUT", text)
    assert zcoll._timeout_seconds(timedelta(minutes=30)) == seconds


@pytest.mark.parametrize("text", ["0", "-5", "abc", "1.5", "10s", "60 ", str(2**31)])
def test_zcoll_timeout_invalid_is_refused(monkeypatch, text):
    import zcoll
    monkeypatch.setenv("ZCOLL_TIMEOUT", text)
    with pytest.raises(ValueError, match="ZCOLL_TIMEOUT=.*whole number from 1"):
        zcoll._timeout_seconds(timedelta(minutes=30))


def test_torch_timeout_used_without_zcoll_timeout(monkeypatch):
    import zcoll
    monkeypatch.delenv("ZCOLL_TIMEOUT", raising=False)
    assert zcoll._timeout_seconds(timedelta(seconds=42.5)) == 43
    monkeypatch.setenv("ZCOLL_TIMEOUT", "")
    assert zcoll._timeout_seconds(timedelta(seconds=7)) == 7
    assert zcoll._timeout_seconds(None) == int(dist.default_pg_timeout.total_seconds())


def _init_in_subprocess(env, world=2, timeout=120):
    """torchrun of `world` ranks that only create the zcoll group; returns (rc, output)."""
    script = textwrap.dedent("""
        import time
        import torch.distributed as dist
        import zcoll  # noqa: F401  (torch 2.11 loads no c10d backend by name without it)
        try:
            dist.init_process_group("zcoll")
        except Exception as err:
            print(f"INIT FAILED {type(err).__name__}: {err}", flush=True)
            # torchrun SIGTERMs the other ranks once one exits non-zero: give them the time to
            # fail and say so themselves (a rank that was killed first printed nothing).
            time.sleep(2)
            raise SystemExit(3)
        print("INIT OK", flush=True)
        dist.destroy_process_group()
    """)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "init.py")
        with open(path, "w") as f:
            f.write(script)
        full_env = dict(os.environ)
        full_env.update(env)
        out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                              "--nproc-per-node", str(world), path],
                             env=full_env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


@pytest.mark.parametrize("value", ["0", "-1"])
def test_invalid_zcoll_timeout_fails_init_on_every_rank(value):
    """Before: ZCOLL_TIMEOUT=0 hung init under torch (torch's timeout, 30 min, took over)."""
    rc, out = _init_in_subprocess({"ZCOLL_TIMEOUT": value})
    assert rc != 0, out
    assert out.count("INIT FAILED ValueError: zcoll: ZCOLL_TIMEOUT=") == 2, out[-3000:]


def scenario_late_peer(rank, world):
    """Rank 1 joins the all-reduce 10 s late; zcoll's bound (2 s here) ends rank 0's wait."""
    dist.barrier()
    if rank == 1:
        time.sleep(10)
    failed = None
    try:
        dist.all_reduce(torch.ones(4))
    except dist.DistBackendError as err:
        failed = str(err)
    if rank == 0:
        assert failed is not None and "zcollAllReduce failed" in failed, failed


@pytest.mark.parametrize("env,timeout_s", [({"ZCOLL_TIMEOUT": "2"}, 60),   # zcoll's governs
                                           ({"ZCOLL_TIMEOUT": None}, 2)])  # else torch's
def test_timeout_bounds_waits(env, timeout_s):
    _run("late_peer", env=env, timeout_s=timeout_s)


# ---- zcoll's message in every error -------------------------------------------------------------

def test_init_failure_carries_zcoll_message():
    """Before: '... zcollCommInitRankConfig failed: invalid argument (3): ' (no reason)."""
    rc, out = _init_in_subprocess({"ZCOLL_REDUCE_PARTIALS": "bogus", "ZCOLL_TIMEOUT": "60"},
                                  world=1)
    assert rc != 0, out
    failure = [line for line in out.splitlines() if line.startswith("INIT FAILED")]
    assert len(failure) == 1, out[-3000:]
    assert "zcollCommInitRankConfig failed" in failure[0], failure
    assert failure[0].endswith("ZCOLL_REDUCE_PARTIALS=bogus: use fp32 or dtype"), failure


# ---- Work.wait(timeout) -----------------------------------------------------------------------

def scenario_wait_timeout(rank, world):
    """Rank 1 joins 2 s late; rank 0's wait(0.2 s) times out every time, whichever thread
    would have run the operation (before: rank 0 often ran it itself, ignoring the timeout)."""
    for _ in range(3):
        dist.barrier()
        t = torch.ones(4)
        if rank == 1:
            time.sleep(2)
        work = dist.all_reduce(t, async_op=True)
        if rank == 0:
            with pytest.raises(dist.DistBackendError, match="timed out after 200 ms"):
                work.wait(timeout=timedelta(milliseconds=200))
        work.wait()  # the operation was not cancelled
        assert torch.all(t == world)


def test_work_wait_timeout_alike_on_every_rank():
    _run("wait_timeout")


# ---- torch.ops.zcoll.all_gather_hier: one registered work ---------------------------------------

def scenario_hier_op(rank, world):
    from torch._C._distributed_c10d import _get_work_registry_size
    name = dist.distributed_c10d._get_default_group().group_name
    x = torch.full((4,), float(rank))
    expect = torch.arange(world).repeat_interleave(4).float()
    for waited in (0, 1):  # wait_tensor on the output, then on the secondary only
        outs = torch.ops.zcoll.all_gather_hier(x, name, quantized=False)
        torch.ops._c10d_functional.wait_tensor(outs[waited])
        assert _get_work_registry_size() == 0, waited
        assert torch.equal(outs[0], expect)
        assert outs[1].numel() == 4 * 2  # nodes * input.numel(): 2 emulated nodes


def test_all_gather_hier_op_leaves_nothing_unwaited():
    """Before: waiting the output left the secondary's work registered ('unwaited collective
    calls' at exit)."""
    _run("hier_op", env={"ZCOLL_HOSTID": "node{rank}"})


SCENARIOS = {f.__name__[len("scenario_"):]: f for f in
             [scenario_debug_detail, scenario_late_peer, scenario_wait_timeout, scenario_hier_op]}


# ---- DeepSpeed's ZeRO++ options without zcoll.deepspeed.enable() -------------------------------

DS_PROBE = textwrap.dedent("""
    import os
    os.environ["DS_ACCELERATOR"] = "cpu"
    import torch
    {imports}
    from deepspeed.runtime.zero.partition_parameters import CUDAQuantizer
    from deepspeed.runtime.comm import coalesced_collectives
    for what, call in [("qwZ", CUDAQuantizer),
                       ("qgZ", lambda: coalesced_collectives.all_to_all_quant_reduce(
                           [torch.zeros(8, 8)], {{}}))]:
        try:
            call()
            print(what, "NO ERROR")
        except ValueError as err:
            print(what, "HINT" if "call zcoll.deepspeed.enable()" in str(err) else "BARE", err)
""")


@pytest.mark.parametrize("imports", ["import zcoll\nimport deepspeed",
                                     "import deepspeed\nimport zcoll"])
def test_deepspeed_zeropp_without_enable_says_what_to_call(imports):
    pytest.importorskip("deepspeed")
    out = subprocess.run([sys.executable, "-c", DS_PROBE.format(imports=imports)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "qwZ HINT" in out.stdout and "qgZ HINT" in out.stdout, out.stdout


# ---- pip install without --no-build-isolation ------------------------------------------------

def test_setup_without_torch_says_how_to_install(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\")\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "setup.py", "--name"], cwd=PYTHON_DIR, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "Install torch first" in out.stderr, out.stderr
    assert "pip install --no-build-isolation ./python" in out.stderr, out.stderr
