"""What a user reads when something is off (issue 42): argument errors are TypeError / ValueError
naming torch's dtypes and ops (never DistBackendError, torch's type for a failed backend) and put
no zcoll WARN line on stderr; zcoll.__version__; zcoll.fsdp.zeropp on one node and
zcoll.deepspeed's hpZ partition size say once what they mean. 2 ranks, CPU."""
import os
import re
import subprocess
import sys
import tempfile
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")
torch.set_num_threads(1)

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)


def _raises(kind, match, fn):
    """fn() raises exactly `kind` (TypeError or ValueError: not a DistBackendError) matching."""
    with pytest.raises(kind, match=match) as info:
        fn()
    assert not isinstance(info.value, dist.DistBackendError), type(info.value)
    return info.value


# ---- argument errors ------------------------------------------------------------------------

def scenario_argument_errors(rank, world):
    import zcoll.zeropp as zpp
    f32, f64 = torch.ones(256), torch.empty(256 * world, dtype=torch.float64)
    full = torch.empty(256 * world)
    ints = torch.ones(256, dtype=torch.int32)
    # ZeRO++: the dtypes, ops and settings zcoll takes, checked before anything is issued
    _raises(TypeError, r"zcoll: quantized_all_gather quantizes torch\.float32, torch\.float16 or "
            r"torch\.bfloat16 tensors, got torch\.int32",
            lambda: zpp.quantized_all_gather(torch.empty(256 * world, dtype=torch.int32), ints))
    _raises(ValueError, r"zcoll: quantized_all_gather: bits=3 is not 4 or 8",
            lambda: zpp.quantized_all_gather(full, f32, bits=3))
    _raises(ValueError, r"zcoll: quantized_all_gather: block_size=100 is not a multiple of 32 in "
            r"\[32, 4096\]", lambda: zpp.quantized_all_gather(full, f32, block_size=100))
    _raises(TypeError, r"output and input dtypes differ \(torch\.float64 and torch\.float32\)",
            lambda: zpp.quantized_all_gather(f64, f32))
    _raises(TypeError, r"all_gather_hier \(quantized=True\) quantizes .* got torch\.int64",
            lambda: zpp.all_gather_hier(torch.empty(256 * world, dtype=torch.int64),
                                        torch.ones(256, dtype=torch.int64)))
    grads, shard = torch.ones(256 * world), torch.empty(256)
    _raises(ValueError, r"zcoll: quantized_reduce_scatter takes ReduceOp\.SUM, AVG or PREMUL_SUM, "
            r"got ReduceOp\.MAX",
            lambda: zpp.quantized_reduce_scatter(shard, grads, op=dist.ReduceOp.MAX))
    _raises(TypeError, r"quantized_reduce_scatter quantizes .* got torch\.float64",
            lambda: zpp.quantized_reduce_scatter(torch.empty(256, dtype=torch.float64),
                                                 torch.ones(256 * world, dtype=torch.float64)))
    _raises(ValueError, r"intra_bits=5 is not 4, 8 or 16",
            lambda: zpp.quantized_reduce_scatter(shard, grads, intra_bits=5))
    _raises(ValueError, r"pipeline_depth=65 is not in \[1, 64\]",
            lambda: zpp.quantized_reduce_scatter(shard, grads, pipeline_depth=65))
    # torch.distributed's own calls
    _raises(TypeError, r"reductions on torch\.bool tensors",
            lambda: dist.all_reduce(torch.zeros(4, dtype=torch.bool)))
    _raises(TypeError, r"unsupported dtype torch\.uint16 \(supported: torch\.int8",
            lambda: dist.broadcast(torch.zeros(4, dtype=torch.uint16), src=0))
    _raises(ValueError, r"unsupported ReduceOp\.BAND",
            lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND))
    _raises(TypeError, r"PREMUL_SUM needs a floating-point tensor \(got torch\.int32\)",
            lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                    op=dist._make_nccl_premul_sum(2.0)))
    _raises(ValueError, r"world_size \* input\.numel\(\)",
            lambda: dist.all_gather_into_tensor(torch.zeros(3), torch.zeros(2)))
    _raises(ValueError, r"world_size output and world_size input",
            lambda: dist.all_to_all([torch.zeros(2)] * (world + 1), [torch.zeros(2)] * (world + 1)))
    t = torch.ones(4)
    dist.all_reduce(t)  # the group is still usable
    assert torch.all(t == world)
    print(f"rank {rank}: argument errors checked", file=sys.stderr, flush=True)


def test_argument_errors_are_type_and_value_errors_without_warn_lines(capfd):
    _run("argument_errors")
    err = capfd.readouterr().err
    assert err.count("argument errors checked") == 2, err
    # zcoll logs a failed call at WARN; an argument error never reaches zcoll's C calls
    assert not re.search(r"zcoll WARN", err), err


# ---- zcoll.__version__ ----------------------------------------------------------------------

def test_version_matches_pyproject_library_and_zcoll_info():
    import tomllib

    import zcoll
    with open(os.path.join(PYTHON_DIR, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", zcoll.__version__), zcoll.__version__
    assert zcoll.__version__ == project
    assert zcoll._C.library_version() == zcoll.__version__
    info = os.path.join(os.environ.get("ZCOLL_BUILD_DIR", os.path.join(REPO, "build")), "tools",
                        "zcoll_info")
    if not os.access(info, os.X_OK):
        pytest.skip(f"no {info} to compare with")
    line = subprocess.run([info, "--version"], capture_output=True, text=True, check=True).stdout
    assert line.startswith(f"zcoll {zcoll.__version__} "), line


# ---- warnings said once ---------------------------------------------------------------------

def _tiny_model():
    import torch.nn as nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 8))


def _zeropp_warnings(**kwargs):
    import zcoll.fsdp as zf
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = _tiny_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        zf.zeropp(model, modules=list(model), mesh=mesh, **kwargs)
    return [str(w.message) for w in caught if "zcoll.fsdp.zeropp" in str(w.message)]


def scenario_fsdp_one_node(rank, world):
    said = _zeropp_warnings()
    assert len(said) == 1, said
    assert ("zcoll.fsdp.zeropp: the model's shard group lies on one node, so qwZ and hpZ run "
            "exact there" in said[0]), said
    assert "qgZ still quantizes the gradients' reduce-scatter (intra-node hop, INT4)" in said[0]
    assert _zeropp_warnings() == []  # once per process
    print(f"rank {rank}: one-node warning checked", file=sys.stderr, flush=True)


def scenario_fsdp_two_nodes(rank, world):
    assert _zeropp_warnings(hpz=False) == []  # the gathers cross nodes: qwZ quantizes them
    print(f"rank {rank}: two-node silence checked", file=sys.stderr, flush=True)


def test_fsdp_zeropp_on_one_node_says_once_that_qwz_hpz_run_exact(capfd):
    pytest.importorskip("torch.distributed.fsdp")
    _run("fsdp_one_node")
    assert capfd.readouterr().err.count("one-node warning checked") == 2


def test_fsdp_zeropp_on_two_nodes_says_nothing(capfd):
    pytest.importorskip("torch.distributed.fsdp")
    _run("fsdp_two_nodes", hosts=("node0", "node1"))
    assert capfd.readouterr().err.count("two-node silence checked") == 2


def scenario_deepspeed_hpz(rank, world):
    import deepspeed
    import zcoll.deepspeed as zds
    from deepspeed.utils import groups
    deepspeed.init_distributed(dist_backend="zcoll")  # takes torch's default group
    # 2 emulated nodes of 1 rank: hpZ's group should be 1 rank (no secondary partition needed)
    assert zds.hpz_partition_warning(1) == ""
    message = zds.hpz_partition_warning(2)
    assert message == (
        "zcoll.deepspeed: zero_hpz_partition_size=2 differs from the ranks per node (1 on each "
        "of 2 nodes, as zcoll sees them), so its groups of consecutive ranks span nodes and hpZ's "
        "backward all-gather crosses nodes. Set it to 1 (zcoll.fsdp.ranks_per_node())."), message
    zds.enable()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        groups._create_zero_param_parallel_group(2)  # as DeepSpeed calls it
        groups._ZERO_PARAM_INTRA_PARALLEL_GROUP = None
        groups._create_zero_param_parallel_group(2)
    said = [str(w.message) for w in caught if "zcoll.deepspeed" in str(w.message)]
    assert said == [message], said
    assert groups._get_zero_param_intra_parallel_group() is not None  # DeepSpeed's still made
    print(f"rank {rank}: hpz warning checked", file=sys.stderr, flush=True)


def scenario_deepspeed_hpz_one_node(rank, world):
    import zcoll.deepspeed as zds
    assert zds.hpz_partition_warning(2) == ""  # 2 ranks on one node: the node's group
    assert zds.hpz_partition_warning(8) == ""  # DeepSpeed clamps it to the world size (2)
    print(f"rank {rank}: hpz one-node checked", file=sys.stderr, flush=True)


def test_deepspeed_warns_when_hpz_partition_differs_from_ranks_per_node(capfd):
    pytest.importorskip("deepspeed")
    _run("deepspeed_hpz", hosts=("node0", "node1"))
    assert capfd.readouterr().err.count("hpz warning checked") == 2


def test_deepspeed_hpz_partition_of_the_node_is_silent(capfd):
    _run("deepspeed_hpz_one_node")
    assert capfd.readouterr().err.count("hpz one-node checked") == 2


# ---- running ranks --------------------------------------------------------------------------

SCENARIOS = {f.__name__[len("scenario_"):]: f for f in
             [scenario_argument_errors, scenario_fsdp_one_node, scenario_fsdp_two_nodes,
              scenario_deepspeed_hpz, scenario_deepspeed_hpz_one_node]}


def _worker(rank, path, scenario, world, hosts):
    import zcoll  # noqa: F401
    torch.set_num_threads(1)
    if hosts is not None:
        os.environ["ZCOLL_HOSTID"] = hosts[rank]
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    try:
        SCENARIOS[scenario](rank, world)
    finally:
        dist.destroy_process_group()


def _run(scenario, world=2, hosts=None):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_worker, args=(os.path.join(d, "store"), scenario, world, hosts),
                           nprocs=world, join=True, start_method="fork")
