"""torch's groups told apart (issue 42): the default group and a new_group over the same ranks
(as FSDP2's meshes, DeepSpeed and DDP make them) are two communicators named after torch's
group names, `zcoll_info --status` lists them as two communicators with each rank once and no
mismatch, and each writes its own flight-recorder dump. 2 ranks on CPU."""
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("ZCOLL_SOCKET_IFNAME", "lo")
os.environ.setdefault("UCX_NET_DEVICES", "lo")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZCOLL_INFO = os.path.join(os.environ.get("ZCOLL_BUILD_DIR", os.path.join(ROOT, "build")),
                          "tools", "zcoll_info")


def _status_blocks(text, pids):
    """`zcoll_info --status`'s communicators whose ranks run in `pids` (other jobs of this user
    may run beside this test): a list of (header line, rank lines, '=>' lines)."""
    blocks, cur = [], None
    for line in text.splitlines():
        if line.startswith("comm "):
            cur = (line, [], [])
            blocks.append(cur)
        elif cur is not None and line.split()[:1] == ["rank"]:
            cur[1].append(line)
        elif cur is not None and line.lstrip().startswith("=>"):
            cur[2].append(line)
    return [b for b in blocks if any(r.split()[3] in pids for r in b[1])]


def _worker(rank, world, path, dump_dir, out):
    os.environ["ZCOLL_DEBUG_DUMP"] = os.path.join(dump_dir, "fr.%r.json")
    os.environ["ZCOLL_DEBUG_DUMP_SIGNAL"] = "USR1"
    import zcoll  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("zcoll", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    try:
        world_group = dist.group.WORLD
        twin = dist.new_group(ranks=list(range(world)))  # the same ranks, another group
        names = {}
        for g in (world_group, twin):
            backend = g._get_backend(torch.device("cpu"))
            names[g.group_name] = backend.comm_name
            assert backend.comm_name == f"torch:{g.group_name}", (backend.comm_name, g.group_name)
        assert len(set(names.values())) == 2, names
        # Different last calls on the two groups: merged into one communicator, they read as
        # mismatched calls.
        t = torch.full((4,), float(rank))
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((4,), float(world * (world - 1) // 2)))
        b = torch.full((2,), float(rank))
        dist.broadcast(b, src=1, group=twin)
        assert torch.equal(b, torch.full((2,), 1.0))

        store = dist.distributed_c10d._get_default_store()
        store.set(f"pid{rank}", str(os.getpid()))
        if rank == 0:
            pids = {store.get(f"pid{r}").decode() for r in range(world)}
            status = subprocess.run([ZCOLL_INFO, "--status"], capture_output=True, text=True,
                                    timeout=60).stdout
            with open(out, "w") as f:
                json.dump({"status": status, "pids": sorted(pids), "names": names}, f)
            store.set("status_read", "1")
        store.wait(["status_read"])
        # ZCOLL_DEBUG_DUMP_SIGNAL: every communicator of this process dumps.
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 20
        while len(glob.glob(os.path.join(dump_dir, f"fr.{rank}.*json"))) < 2:
            assert time.monotonic() < deadline, os.listdir(dump_dir)
            time.sleep(0.05)
        dist.barrier()  # no rank leaves (and ends its communicators) before the other dumped
    finally:
        dist.destroy_process_group()


def test_default_group_and_new_group_over_the_same_ranks_are_told_apart():
    if not os.access(ZCOLL_INFO, os.X_OK):
        pytest.skip(f"no zcoll_info at {ZCOLL_INFO} (set ZCOLL_BUILD_DIR to the build directory)")
    world = 2
    with tempfile.TemporaryDirectory() as d:
        dumps = os.path.join(d, "dumps")
        os.mkdir(dumps)
        out = os.path.join(d, "status.json")
        mp.start_processes(_worker, args=(world, os.path.join(d, "store"), dumps, out),
                           nprocs=world, join=True, start_method="fork")
        with open(out) as f:
            got = json.load(f)
        files = sorted(os.listdir(dumps))
        records = [json.load(open(os.path.join(dumps, name))) for name in files]

    names = got["names"]
    blocks = _status_blocks(got["status"], set(got["pids"]))
    print(got["status"])
    # (b) two communicators, each rank once in each, nothing holding either up.
    assert len(blocks) == 2, got["status"]
    ids = {}
    for header, ranks, arrows in blocks:
        m = re.match(r"comm (\S+) \(id ([0-9a-f]{16}), 2 ranks\)$", header)
        assert m, header
        ids[m.group(1)] = m.group(2)
        assert sorted(r.split()[1] for r in ranks) == ["0", "1"], (header, ranks)
        assert arrows == [], (header, arrows)
    # (a) named after torch's group names, so the two differ.
    assert sorted(ids) == sorted(names.values()), (ids, names)
    assert len(set(ids.values())) == 2, ids

    # (c) each rank's two communicators wrote two files (fr.<rank>.comm<id>.json: the pattern
    # has no %i and each process has more than one communicator).
    assert len(files) == 4, files
    for rec, name in zip(records, files):
        assert rec["reason"] == "signal", rec
        assert name == f"fr.{rec['rank']}.comm{rec['comm_id']}.json", (name, rec["comm_id"])
        assert ids[rec["comm"]] == rec["comm_id"], (rec["comm"], rec["comm_id"], ids)
    for rank in range(world):
        mine = [r for r in records if r["rank"] == rank]
        assert sorted(r["comm"] for r in mine) == sorted(names.values()), mine
