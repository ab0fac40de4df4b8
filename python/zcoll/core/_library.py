"""Loads libzcoll.so with ctypes and declares the C functions zcoll.core calls.

Which file: ``ZCOLL_LIBRARY`` when set (a path), else the libzcoll.so.0 installed next to the
``zcoll`` package (the zcoll-core wheel bundles it), else the system's (``libzcoll.so.0`` on the
loader's path). ctypes.CDLL releases the GIL around every foreign call, so another Python
thread runs while a collective blocks.
"""
import ctypes
import os
from pathlib import Path

from .errors import ArgumentError, error_for

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _find():
    forced = os.environ.get("ZCOLL_LIBRARY", "")
    if forced:
        return forced
    for name in ("libzcoll.so.0", "libzcoll.so"):
        bundled = _PACKAGE_DIR / name
        if bundled.exists():
            return str(bundled)
    return "libzcoll.so.0"


def _load():
    path = _find()
    try:
        return ctypes.CDLL(path), path
    except OSError as err:
        raise ImportError(
            f"zcoll.core cannot load libzcoll ({path}): {err}. Install the zcoll-core package "
            f"(pip install ./python/core), or set ZCOLL_LIBRARY to a libzcoll.so path.") from err


lib, _path = _load()

c_comm = ctypes.c_void_p
c_request = ctypes.c_void_p
c_size = ctypes.c_size_t
c_int = ctypes.c_int
c_ptr = ctypes.c_void_p


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


# Every zcoll* function returns zcollResult_t (an int); argtypes make ctypes convert ints.
_SIGNATURES = {
    "zcollGetVersion": [ctypes.POINTER(c_int)],
    "zcollGetDeviceSupport": [ctypes.POINTER(c_int)],
    "zcollMemAllocHost": [ctypes.POINTER(c_ptr), c_size],
    "zcollMemFreeHost": [c_ptr],
    "zcollGetUniqueId": [ctypes.POINTER(UniqueIdStruct)],
    "zcollCommInitRankConfig": [ctypes.POINTER(c_comm), c_int, UniqueIdStruct, c_int, c_ptr],
    "zcollCommInitFromEnv": [ctypes.POINTER(c_comm), c_ptr],
    "zcollCommSplit": [c_comm, c_int, c_int, ctypes.POINTER(c_comm), c_ptr],
    "zcollCommShrink": [c_comm, ctypes.POINTER(c_int), c_int, ctypes.POINTER(c_comm), c_ptr,
                        c_int],
    "zcollCommRevoke": [c_comm],
    "zcollCommDestroy": [c_comm],
    "zcollCommAbort": [c_comm],
    "zcollCommGetAsyncError": [c_comm, ctypes.POINTER(c_int)],
    "zcollCommCount": [c_comm, ctypes.POINTER(c_int)],
    "zcollCommUserRank": [c_comm, ctypes.POINTER(c_int)],
    "zcollCommNodeCount": [c_comm, ctypes.POINTER(c_int)],
    "zcollCommNodeRank": [c_comm, ctypes.POINTER(c_int)],
    "zcollCommLocalRank": [c_comm, ctypes.POINTER(c_int)],
    "zcollCommLocalSize": [c_comm, ctypes.POINTER(c_int)],
    "zcollAllGather": [c_ptr, c_ptr, c_size, c_int, c_comm, c_ptr],
    "zcollReduceScatter": [c_ptr, c_ptr, c_size, c_int, c_int, c_comm, c_ptr],
    "zcollAllReduce": [c_ptr, c_ptr, c_size, c_int, c_int, c_comm, c_ptr],
    "zcollAllToAll": [c_ptr, c_ptr, c_size, c_int, c_comm, c_ptr],
    "zcollBroadcast": [c_ptr, c_ptr, c_size, c_int, c_int, c_comm, c_ptr],
    "zcollReduce": [c_ptr, c_ptr, c_size, c_int, c_int, c_int, c_comm, c_ptr],
    "zcollGather": [c_ptr, c_ptr, c_size, c_int, c_int, c_comm, c_ptr],
    "zcollScatter": [c_ptr, c_ptr, c_size, c_int, c_int, c_comm, c_ptr],
    "zcollBarrier": [c_comm, c_ptr],
    "zcollSend": [c_ptr, c_size, c_int, c_int, c_comm, c_ptr],
    "zcollRecv": [c_ptr, c_size, c_int, c_int, c_comm, c_ptr],
    "zcollGroupStart": [],
    "zcollGroupEnd": [],
    "zcollGroupEndNonBlocking": [ctypes.POINTER(c_request)],
    "zcollRequestTest": [c_request, ctypes.POINTER(c_int)],
    "zcollRequestWait": [c_request],
    "zcollRequestFree": [c_request],
    "zcollQuantizedAllGather": [c_ptr, c_ptr, c_size, c_int, c_ptr, c_comm, c_ptr],
    "zcollSecondaryShardCount": [c_comm, c_size, ctypes.POINTER(c_size)],
    "zcollAllGatherHier": [c_ptr, c_ptr, c_ptr, c_size, c_int, c_ptr, c_comm, c_ptr],
    "zcollAllGatherFromSecondary": [c_ptr, c_ptr, c_size, c_int, c_comm, c_ptr],
    "zcollQuantizedReduceScatter": [c_ptr, c_ptr, c_size, c_int, c_int, c_ptr, c_comm, c_ptr],
    "zcollQuantizedAllReduce": [c_ptr, c_ptr, c_size, c_int, c_int, c_ptr, c_comm, c_ptr],
    "zcollQuantizedAllReduceResidualSize": [c_size, c_int, c_ptr, c_comm,
                                            ctypes.POINTER(c_size)],
    "zcollQuantizedAllReduceWithResidual": [c_ptr, c_ptr, c_size, c_int, c_int, c_ptr, c_ptr,
                                            c_size, c_comm, c_ptr],
}
for _name, _args in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.argtypes = _args
    _fn.restype = c_int
lib.zcollGetErrorString.argtypes = [c_int]
lib.zcollGetErrorString.restype = ctypes.c_char_p
lib.zcollGetLastError.argtypes = [c_comm]
lib.zcollGetLastError.restype = ctypes.c_char_p


def library_path():
    """The path of the libzcoll.so this process loaded (what ZCOLL_LIBRARY, the bundled copy
    or the system's resolved to)."""
    try:
        return os.path.realpath(_loaded_path())
    except OSError:
        return _path


def _loaded_path():
    # dladdr on a symbol of the library gives the file the loader actually mapped.
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", c_ptr),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", c_ptr)]
    libdl = ctypes.CDLL(None)
    info = DlInfo()
    address = ctypes.cast(lib.zcollGetVersion, c_ptr)
    if not libdl.dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        raise OSError("dladdr failed")
    return info.dli_fname.decode()


def check(result, comm=None, what=""):
    """Raises the exception for a failed call, with zcoll's last error text (of `comm`, or of
    the calling thread when comm is None)."""
    if result == 0:
        return
    detail = (lib.zcollGetLastError(comm) or b"").decode(errors="replace")
    summary = (lib.zcollGetErrorString(result) or b"").decode(errors="replace")
    message = f"zcoll.core: {what} failed: {detail or summary}"
    raise error_for(result, message)


def version():
    """libzcoll's version as "MAJOR.MINOR.PATCH" (zcollGetVersion)."""
    code = c_int()
    check(lib.zcollGetVersion(ctypes.byref(code)), what="zcollGetVersion")
    return f"{code.value // 10000}.{code.value // 100 % 100}.{code.value % 100}"


_device_support = None


def device_support():
    """True when this process's libzcoll takes CUDA device buffers (zcollGetDeviceSupport)."""
    global _device_support
    if _device_support is None:
        flag = c_int()
        check(lib.zcollGetDeviceSupport(ctypes.byref(flag)), what="zcollGetDeviceSupport")
        _device_support = bool(flag.value)
    return _device_support


def require(condition, message):
    if not condition:
        raise ArgumentError(f"zcoll.core: {message}")
