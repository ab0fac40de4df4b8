"""What the installed torch offers, for tests that need a torch feature newer than the oldest
supported torch (2.11): each probe reads torch itself, never a version number, and is used as
`pytest.mark.skipif(not FEATURE, reason=...)` or to leave a step out with its reason."""
import inspect

import torch
import torch.distributed as dist

# torch 2.11's split_group refuses a default group without a bound accelerator ("No device
# associated with the default pg"); later releases split a CPU group.
CPU_SPLIT_GROUP = hasattr(dist, "split_group") and \
    "not safe to split" not in inspect.getsource(dist.split_group)
CPU_SPLIT_GROUP_WHY = "this torch's dist.split_group needs a default group bound to an " \
    "accelerator (torch 2.11: 'No device associated with the default pg')"

# torch 2.11's init_process_group takes only an accelerator as device_id (checked in
# _new_process_group_helper).
CPU_DEVICE_ID = "must be an accelerator" not in inspect.getsource(
    dist.distributed_c10d._new_process_group_helper)
CPU_DEVICE_ID_WHY = "this torch's init_process_group refuses a CPU device_id (torch 2.11)"

# Backend.get_error and dist.set_timeout arrived after torch 2.11.
BACKEND_GET_ERROR = hasattr(torch._C._distributed_c10d.Backend, "get_error")
BACKEND_GET_ERROR_WHY = "this torch's Backend has no get_error (torch 2.11)"
SET_TIMEOUT = hasattr(dist, "set_timeout")
SET_TIMEOUT_WHY = "this torch has no dist.set_timeout (torch 2.11)"

# torch 2.15 loads a c10d backend by name through the torch.distributed.backends entry points
# (init_process_group("zcoll") with no import); torch 2.11 needs `import zcoll` first.
BACKEND_ENTRY_POINTS = hasattr(dist.Backend, "_ensure_backend_registered")
BACKEND_ENTRY_POINTS_WHY = "this torch loads no c10d backend through entry points (torch " \
    "2.11): `import zcoll` before init_process_group"
