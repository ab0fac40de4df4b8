"""zcoll as a torch.distributed backend (CPU tensors, and CUDA tensors where both this build and
libzcoll have CUDA: ``zcoll._C.built_with_cuda`` and ``zcoll._C.zcoll_takes_device_buffers()``).

``dist.init_process_group("zcoll")`` works without importing this module: torch loads it through
the ``torch.distributed.backends`` entry point, which calls :func:`register`.
"""
from datetime import timedelta

import torch

TESTED_TORCH = ((2, 15), (2, 16))  # [low, high): the extension is compiled per torch version


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
    if _C.built_with_cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
        # zcoll moves CUDA tensors of the device current when the group is created, once this
        # process has initialized it; torch.cuda.set_device(d) with d already current does not.
        torch.cuda.synchronize()
    if rank == 0:
        store.set(_UID_KEY, _C.get_unique_id())
    uid = store.get(_UID_KEY)
    timeout = opts.timeout if isinstance(opts.timeout, timedelta) else timedelta(seconds=300)
    return _C.ZcollBackend(uid, rank, size, max(1, int(timeout.total_seconds())))


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
    from 4 MiB, and a registered hpZ secondary; docs/README.md, "Registered host memory"). It
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
from . import ops  # noqa: E402,F401  (the same as torch ops: torch.ops.zcoll.*)
