"""Loads libzcoll_jax.so (the XLA FFI handlers, csrc/) and registers its targets with JAX.

Which file: ``ZCOLL_JAX_LIBRARY`` when set (a path), else libzcoll_jax.so next to the ``zcoll``
package (a wheel bundles it), else the one beside the libzcoll.so that zcoll.core loaded (a
CMake build directory holds both), else the loader's search path. zcoll.core is imported first,
so libzcoll_jax.so's dependency on libzcoll.so.0 resolves to the library zcoll.core already
loaded (the loader matches the soname): the communicator handles zcoll.core creates are then
valid in the handlers. A second, different libzcoll in the process is refused at import.
"""
import ctypes
import os
from pathlib import Path

import jax.ffi

from ..core import _library as _core_library

# Python name -> the exported symbol prefix (csrc/: <prefix>Host, <prefix>Cuda).
TARGETS = {
    "all_gather": "ZcollJaxAllGather",
    "reduce_scatter": "ZcollJaxReduceScatter",
    "all_reduce": "ZcollJaxAllReduce",
    "all_to_all": "ZcollJaxAllToAll",
    "broadcast": "ZcollJaxBroadcast",
    "quantized_all_gather": "ZcollJaxQuantizedAllGather",
    "all_gather_hier": "ZcollJaxAllGatherHier",
    "all_gather_from_secondary": "ZcollJaxAllGatherFromSecondary",
    "quantized_reduce_scatter": "ZcollJaxQuantizedReduceScatter",
    "quantized_all_reduce": "ZcollJaxQuantizedAllReduce",
}


def target_name(name):
    """The FFI target name zcoll.jax registers for a collective."""
    return f"zcoll_{name}"


def _candidates():
    forced = os.environ.get("ZCOLL_JAX_LIBRARY", "")
    if forced:
        return [forced]
    package = Path(__file__).resolve().parent.parent
    core_dir = Path(_core_library.library_path()).resolve().parent
    paths = [package / "libzcoll_jax.so", core_dir / "libzcoll_jax.so"]
    return [str(p) for p in paths if p.exists()] or ["libzcoll_jax.so"]


def _load():
    path = _candidates()[0]
    try:
        return ctypes.CDLL(path), path
    except OSError as err:
        raise ImportError(
            f"zcoll.jax cannot load its XLA FFI handlers ({path}): {err}. Build them with "
            f"CMake in an environment where python3 imports jax (ZCOLL_WITH_JAX, target "
            f"zcoll_jax), then set ZCOLL_JAX_LIBRARY to build/libzcoll_jax.so or "
            f"ZCOLL_LIBRARY to the libzcoll.so beside it.") from err


def _loaded_libzcolls():
    """The distinct libzcoll.so files mapped into this process."""
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            name = line.split(maxsplit=5)[-1].strip()
            if os.path.basename(name).startswith("libzcoll.so"):
                found.add(os.path.realpath(name))
    return found


def _check_one_libzcoll(path):
    if not os.path.exists("/proc/self/maps"):
        return
    loaded = _loaded_libzcolls()
    if len(loaded) > 1:
        raise ImportError(
            f"zcoll.jax: {path} loaded another libzcoll than zcoll.core's "
            f"({', '.join(sorted(loaded))}); a communicator of one is not valid in the other. "
            f"Point ZCOLL_LIBRARY and ZCOLL_JAX_LIBRARY at one build.")


def _cuda_platform_present():
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


# A capsule holding a handler's address, as jax.ffi.pycapsule makes it, from a private ctypes
# prototype: jax.ffi.pycapsule sets argtypes on the process-wide ctypes.pythonapi.PyCapsule_New,
# which would break any other module of the process (zcoll.core's DLPack export among them)
# that declared that function its own way.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))


def _capsule(function):
    return _capsule_new(ctypes.cast(function, ctypes.c_void_p).value, None, None)


def _register(lib):
    platforms = [("cpu", "Host")]
    if _cuda_platform_present():
        platforms.append(("CUDA", "Cuda"))
    for name, symbol in TARGETS.items():
        for platform, suffix in platforms:
            handler = getattr(lib, symbol + suffix)
            jax.ffi.register_ffi_target(target_name(name), _capsule(handler),
                                        platform=platform)


lib, path = _load()
_check_one_libzcoll(path)
_register(lib)


def library_path():
    """The libzcoll_jax.so file this process loaded."""
    return os.path.realpath(path)
