"""zcoll.core: zcoll's collectives, qwZ / hpZ / qgZ included, for any Python array library.

Imports no framework: arrays come in through DLPack (NumPy, torch, JAX, CuPy), the CUDA Array
Interface or the buffer protocol, and calls go to libzcoll.so through ctypes (the GIL released
during each). See python/core/README.md.

    import numpy as np, zcoll.core as zc
    with zc.Communicator.from_env() as comm:          # under tools/zcollrun or torchrun
        x = np.full(1024, comm.rank, np.float32)
        out = zc.empty(1024 * comm.size, "float32")   # registered host memory
        comm.quantized_all_gather(x, out, bits=8)
        print(np.from_dlpack(out)[::1024])
"""
from ._library import device_support, library_path, version
from .communicator import Communicator, get_unique_id
from .config import Config
from .errors import (ArgumentError, BufferTypeError, CommError, CommTimeout, UnsupportedError,
                     UsageError, ZcollError)
from .groups import Request, group
from .memory import HostArray, empty

__all__ = ["ArgumentError", "BufferTypeError", "CommError", "CommTimeout", "Communicator",
           "Config", "HostArray", "Request", "UnsupportedError", "UsageError", "ZcollError",
           "device_support", "empty", "get_unique_id", "group", "library_path", "version"]
