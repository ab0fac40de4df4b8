"""zcoll as a torch.distributed backend (CPU tensors, and CUDA tensors where both this build and
libzcoll have CUDA: ``zcoll._C.built_with_cuda`` and ``zcoll._C.zcoll_takes_device_buffers()``).

The torch half of the ``zcoll`` package (the zcoll distribution, python/pyproject.toml); the
package's ``__init__`` imports no framework and loads this module at the first use of a torch
name (``zcoll.register``, ``zcoll.empty_host``, ``zcoll.fsdp``, ...), and ``zcoll.zeropp`` imports
it, so every torch module of the package goes through it. ``dist.init_process_group("zcoll")``
works without importing zcoll: torch loads it through the ``torch.distributed.backends`` entry
point, which calls :func:`register`.
"""
import math
import os
import re
from datetime import timedelta

import torch

TESTED_TORCH = ((2, 11), (2, 16))  # [low, high): the extension is compiled per torch version


def _check_torch():
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if not (TESTED_TORCH[0] <= version < TESTED_TORCH[1]):
        raise ImportError(
            f"zcoll's torch backend was built and tested for torch >= "
            f"{'.'.join(map(str, TESTED_TORCH[0]))}, < {'.'.join(map(str, TESTED_TORCH[1]))}; "
            f"found torch {torch.__version__}. Reinstall zcoll (pip install ./python) against "
            f"this torch.")


_check_torch()

import torch.distributed as dist  # noqa: E402

from . import _C  # noqa: E402

_UID_KEY = "zcoll/unique_id"


def _create_backend(opts, backend_options=None):
    """c10d creator: rank 0 makes the unique id and puts it in the group's store (already
    prefixed per group by c10d), the others read it; no extra port."""
    store, rank, size = opts.store, opts.group_rank, opts.group_size
    timeout_sec = _timeout_seconds(opts.timeout)  # before anything waits on another rank
    # The communicator is named after torch's group name (pg.group_name: "0" for the default
    # group, "1", "2", ... for new_group): zcoll_info --status and flight records tell groups
    # apart by it. torch sets the group's description (group_desc) only after this returns.
    comm_name = f"torch:{opts.group_id}"
    split_from = getattr(opts, "split_from", None)
    if isinstance(split_from, _C.ZcollBackend):
        # new_group on a default group bound with device_id: a zcollCommSplit of it, whose
        # non-members call perform_nocolor_split (torch does).
        return split_from.split_ranks(list(opts.global_ranks_in_group), opts.timeout,
                                      comm_name=comm_name)
    # No device is bound here: CUDA operations connect the group to their tensors' device at
    # the first one (or init_process_group's device_id), as ProcessGroupNCCL does.
    if rank == 0:
        store.set(_UID_KEY, _C.get_unique_id())
    uid = store.get(_UID_KEY)
    return _C.ZcollBackend(uid, rank, size, timeout_sec, comm_name=comm_name)


# An integer as zcoll's C side reads ZCOLL_TIMEOUT (strtoll, base 0: decimal, 0x hex, 0 octal).
_C_INT = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_INT_MAX = 2**31 - 1


def _c_int(text):
    match = _C_INT.fullmatch(text)
    if match is None:
        return None
    sign, digits = match.groups()
    base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
    return int(sign + digits, base)


def _timeout_seconds(torch_timeout):
    """zcoll's bound on every wait, in seconds: ZCOLL_TIMEOUT when set (zcoll's own setting
    governs), else the timeout given to init_process_group / new_group (torch's default when
    none was given). An invalid ZCOLL_TIMEOUT fails here, alike on every rank, before any rank
    waits for another."""
    text = os.environ.get("ZCOLL_TIMEOUT", "")
    if text == "":  # unset or empty: zcoll's C side ignores an empty value too
        if not isinstance(torch_timeout, timedelta):
            torch_timeout = dist.default_pg_timeout
        return max(1, min(_INT_MAX, math.ceil(torch_timeout.total_seconds())))
    value = _c_int(text)
    if value is None or not 1 <= value <= _INT_MAX:
        raise ValueError(
            f"zcoll: ZCOLL_TIMEOUT={text!r} is not valid: it is zcoll's bound on every wait, in "
            f"seconds, and takes a whole number from 1 to {_INT_MAX}. Unset it to use the "
            f"timeout= given to init_process_group.")
    return value


def register():
    """Registers the "zcoll" backend with torch.distributed (idempotent)."""
    if "ZCOLL" not in dist.Backend._plugins:
        devices = ["cpu", "cuda"] if _C.built_with_cuda else ["cpu"]
        dist.Backend.register_backend("zcoll", _create_backend, extended_api=True,
                                      devices=devices)


register()


def empty_host(*size, dtype=torch.float32):
    """A zero-filled CPU tensor of shape ``size`` in registered host memory (zcollMemAllocHost):
    zcoll's collectives on one node read it in place from the peer ranks with plain loads
    instead of a kernel copy (all-gather from 1 MiB per rank, reduce-scatter and all-reduce
    from 4 MiB, and a registered hpZ secondary; docs/MEMORY.md, "Registered host memory"). It
    is an ordinary tensor otherwise; the memory is freed when the last view of it goes.
    ``zcoll.empty_host(4, 1024)`` or ``zcoll.empty_host((4, 1024), dtype=torch.bfloat16)``."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    if not isinstance(dtype, torch.dtype) or dtype.is_complex:
        raise TypeError(f"zcoll.empty_host: dtype must be a real torch.dtype, got {dtype!r}")
    numel = 1
    for d in size:
        if not isinstance(d, int) or d < 0:
            raise ValueError(f"zcoll.empty_host: sizes must be non-negative ints, got {size!r}")
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    return _C.host_bytes(numel * itemsize).view(dtype).view(size)


from . import zeropp  # noqa: E402,F401  (the ZeRO++ collectives: zcoll.zeropp.*)


def get_stats(group=None):
    """zcoll's byte and operation counters (zcollCommGetStats) of `group`'s communicator
    (default: the default group; any group on the zcoll backend, new_group and split_group
    ones included), since the group was created or last reset, as a dict of ints:

    * ``bytes_sent_self`` / ``bytes_recv_self``: bytes this rank copied to itself (its own
      block put in place in an out-of-place gather, ...);
    * ``bytes_sent_intra`` / ``bytes_recv_intra``: bytes this rank sent to / received from
      ranks of its own node (shared-memory reads counted as the sender's send and the reader's
      receive);
    * ``bytes_sent_inter`` / ``bytes_recv_inter``: the same with ranks of other nodes;
    * ``op_count``: collectives and point-to-point operations completed (a coalesced batch:
      each operation in it).

    Nodes are zcoll's (host identity, or ZCOLL_HOSTID). Bytes are those of the messages zcoll's
    algorithms post (no transport headers; ZCOLL_CHECK_CALLS's exchange is not counted). The CPU operations
    issued on the group before this call are waited for first, so each is counted in full.
    A group connected to a CUDA device adds the counters of its device communicator. Counters
    are this rank's: sum them over ranks (e.g. with an all_reduce on another group) for a
    group's total. Raises ValueError when the group does not run on zcoll."""
    return zeropp.zcoll_backend(group, "zcoll.get_stats").get_stats()


def reset_stats(group=None):
    """Sets `group`'s counters (see :func:`get_stats`) to 0 on this rank, after the CPU
    operations issued on the group so far have completed (none of their bytes is counted
    after it). Local: other ranks' counters are untouched. Raises ValueError when the group does
    not run on zcoll."""
    zeropp.zcoll_backend(group, "zcoll.reset_stats").reset_stats()


from . import ops  # noqa: E402,F401  (the same as torch ops: torch.ops.zcoll.*)
from . import fsdp  # noqa: E402,F401  (ZeRO++ in FSDP2: zcoll.fsdp.*)
from . import ddp  # noqa: E402,F401  (DDP's quantized all-reduce hook: zcoll.ddp.*)
from .deepspeed import install_hint as _install_deepspeed_hint  # noqa: E402

_install_deepspeed_hint()  # DeepSpeed's ZeRO++ options without zcoll.deepspeed.enable()
