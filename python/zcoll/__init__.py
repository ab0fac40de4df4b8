"""zcoll: ZeRO++'s collectives (qwZ, hpZ, qgZ) and the standard ones, from Python.

This package imports no framework. Two distributions fill it:

* zcoll-core (python/core): :mod:`zcoll.core`, the collectives for any array library (NumPy,
  JAX, CuPy, torch, bytearray) over DLPack, the CUDA Array Interface and the buffer protocol,
  and the libzcoll.so they call;
* zcoll (python/): the torch.distributed backend, its names reached here as before
  (``zcoll.register``, ``zcoll.empty_host``, ``zcoll.get_stats``, ``zcoll.zeropp``,
  ``zcoll.fsdp``, ``zcoll.ddp``, ``zcoll.deepspeed``, ``zcoll.ops``, ``zcoll.TESTED_TORCH``):
  the first use of one imports torch and the backend (zcoll/_torch.py). In a process that has
  imported torch already, ``import zcoll`` (or ``import zcoll.core``) loads the backend at once,
  as before the split: torch 2.11 registers the backend that way (it has no entry points) and
  DeepSpeed's ZeRO++ hint is installed (zcoll.deepspeed).

``dist.init_process_group("zcoll")`` works without importing this module: torch loads the
backend through the ``torch.distributed.backends`` entry point, ``zcoll:register``.
"""
import importlib
import sys
import warnings

# The package's version: both pyprojects' (python/pyproject.toml, python/core/pyproject.toml), and
# that of the libzcoll it loads (zcollGetVersion; `zcoll_info --version`).
# python/tests/test_user_messages.py and python/core/tests check that they agree.
__version__ = "0.1.0"

# Names of the torch backend (zcoll/_torch.py) and its modules, loaded at first use.
_TORCH_NAMES = frozenset({
    "TESTED_TORCH", "register", "empty_host", "get_stats", "reset_stats", "_C",
    "_check_torch", "_create_backend", "_timeout_seconds", "_c_int",
})
_TORCH_MODULES = frozenset({"zeropp", "ops", "fsdp", "ddp", "deepspeed"})


def __getattr__(name):
    if name in _TORCH_NAMES or name in _TORCH_MODULES:
        try:
            torch_side = importlib.import_module("._torch", __name__)
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}._torch":
                raise
            raise ModuleNotFoundError(
                f"zcoll.{name} belongs to zcoll's torch backend, which is not installed (only "
                f"zcoll-core is): pip install --no-build-isolation ./python",
                name=err.name) from None
        if name in _TORCH_MODULES:
            return importlib.import_module(f".{name}", __name__)
        return getattr(torch_side, name)
    raise AttributeError(f"module 'zcoll' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _TORCH_NAMES | _TORCH_MODULES | {"core"})


def _load_torch_side_if_torch_is_here():
    if "torch" not in sys.modules:
        return  # framework-free: torch is never imported by zcoll itself
    try:
        importlib.import_module("._torch", __name__)
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}._torch":  # only zcoll-core installed: nothing to load
            warnings.warn(f"zcoll: the torch backend did not load: {err}", stacklevel=3)
    except ImportError as err:  # e.g. a torch outside zcoll.TESTED_TORCH; zcoll.core still works
        warnings.warn(f"zcoll: the torch backend did not load: {err}", stacklevel=3)


_load_torch_side_if_torch_is_here()
