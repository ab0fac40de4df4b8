"""Registered host memory that any framework can take without a copy.

``empty(shape, dtype)`` allocates with zcollMemAllocHost (zero-filled, page-aligned memory the
ranks of a node read in place: docs/MEMORY.md, "Registered host memory") and returns a
:class:`HostArray`, which exports DLPack (``np.from_dlpack``, ``torch.from_dlpack``,
``jax.dlpack.from_dlpack``), NumPy's ``__array_interface__`` and a memoryview. The memory is
freed (zcollMemFreeHost) when the array and every tensor made from it are gone.
"""
import ctypes

from . import _dlpack, _library, dtypes
from .errors import ArgumentError, UnsupportedError


class _Allocation:
    """Owns one zcollMemAllocHost block; frees it when the last reference goes."""

    def __init__(self, nbytes):
        self.nbytes = nbytes
        pointer = ctypes.c_void_p()
        # zcollMemAllocHost refuses 0 bytes; an empty array still gets one page.
        _library.check(_library.lib.zcollMemAllocHost(ctypes.byref(pointer), max(nbytes, 1)),
                       what="zcollMemAllocHost")
        self.address = pointer.value
        self._free = _library.lib.zcollMemFreeHost

    def __del__(self):
        address, self.address = getattr(self, "address", None), None
        if address:
            self._free(address)


def _shape(shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    for extent in shape:
        if not isinstance(extent, int) or isinstance(extent, bool) or extent < 0:
            raise ArgumentError(f"zcoll.core.empty: shape must be non-negative ints, got {shape!r}")
    return shape


class HostArray:
    """A C-contiguous array in registered host memory (see :func:`empty`)."""

    def __init__(self, shape, dtype):
        self.shape = _shape(shape)
        self._code = dtypes.parse(dtype)
        self.size = 1
        for extent in self.shape:
            self.size *= extent
        self.itemsize = dtypes.ITEMSIZE[self._code]
        self.nbytes = self.size * self.itemsize
        self._allocation = _Allocation(self.nbytes)

    @property
    def dtype(self):
        """The data type's name ("float32", "bfloat16", ...)."""
        return dtypes.NAMES[self._code]

    @property
    def address(self):
        """The first byte's address (the same for every view made from this array)."""
        return self._allocation.address

    def __repr__(self):
        return (f"zcoll.core.HostArray(shape={self.shape}, dtype={self.dtype}, "
                f"address={self.address:#x})")

    def __dlpack_device__(self):
        return (_dlpack.CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is not None and stream != -1:
            raise BufferError("zcoll.core.HostArray is host memory: __dlpack__ takes stream=None")
        if dl_device is not None and tuple(dl_device) != (_dlpack.CPU, 0):
            raise BufferError(f"zcoll.core.HostArray is on the CPU, not device {dl_device}")
        if copy:
            raise BufferError("zcoll.core.HostArray exports its memory only (copy=True refused)")
        code, bits = dtypes.DLPACK_CODE[self._code]
        versioned = max_version is not None and max_version[0] >= _dlpack.MAJOR_VERSION
        return _dlpack.export(self._allocation, self.address, (_dlpack.CPU, 0), self.shape,
                              code, bits, read_only=False, versioned=versioned)

    @property
    def __array_interface__(self):
        if self._code == dtypes.BFLOAT16:
            raise AttributeError("NumPy has no bfloat16: use np.from_dlpack with ml_dtypes, or "
                                 "torch.from_dlpack")
        kind = "f" if self._code in dtypes.FLOATING else "u" if self._code in (
            dtypes.UINT8, dtypes.UINT32, dtypes.UINT64) else "i"
        order = "|" if self.itemsize == 1 else "<"
        return {"shape": self.shape, "typestr": f"{order}{kind}{self.itemsize}",
                "data": (self.address, False), "version": 3}

    def memoryview(self):
        """A writable memoryview of the bytes (format "B"); it keeps the memory alive."""
        raw = (ctypes.c_char * self.nbytes).from_address(self.address)
        raw._owner = self._allocation  # freed only once the view is gone too
        return memoryview(raw).cast("B")


def empty(shape, dtype="float32", device="cpu"):
    """A zero-filled array of `shape` and `dtype` (a name such as "bfloat16", or numpy/torch
    dtype) in registered host memory. device="cpu" only: libzcoll has no device allocator
    (CUDA buffers come from the framework's own allocator)."""
    if device not in ("cpu", None):
        raise UnsupportedError(f"zcoll.core.empty: device {device!r}: zcoll allocates host "
                               f"memory only (device='cpu'); allocate CUDA memory with your "
                               f"framework")
    return HostArray(shape, dtype)
