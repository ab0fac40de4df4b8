"""From any array object to (address, element count, zcoll data type, memory kind).

The protocols, in order: DLPack (``__dlpack__``, the versioned capsule first, the unversioned
one from producers that do not take ``max_version``), the CUDA Array Interface v3
(``__cuda_array_interface__``), then the buffer protocol (bytearray, array.array, memoryview,
mmap, NumPy). Every array must be C-contiguous with one lane per element; an output must be
writable. A view holds the producer's memory (DLPack tensor, Py_buffer) until released.
"""
import ctypes
from dataclasses import dataclass, field

from . import _dlpack, _library, dtypes
from ._dlpack import python_api
from .errors import ArgumentError, BufferTypeError, UnsupportedError

HOST, DEVICE = "host", "device"


@dataclass
class View:
    """One array as a zcoll call sees it."""
    address: int
    count: int
    dtype: int
    kind: str               # HOST or DEVICE
    device_id: int = 0
    read_only: bool = False
    _release: object = field(default=None, repr=False)

    def release(self):
        release, self._release = self._release, None
        if release is not None:
            release()


def stream_handle(stream):
    """A CUDA stream as an int (cudaStream_t): None -> 0 (the legacy default stream), an int,
    an object with ``__cuda_stream__`` (returning (version, handle)) or ``cuda_stream``."""
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise ArgumentError(f"zcoll.core: stream {stream} is not a CUDA stream handle")
        return stream
    if hasattr(stream, "__cuda_stream__"):
        value = stream.__cuda_stream__
        value = value() if callable(value) else value
        return stream_handle(value[1] if isinstance(value, tuple) else value)
    if hasattr(stream, "cuda_stream"):
        return stream_handle(stream.cuda_stream)
    raise BufferTypeError(f"zcoll.core: stream must be None, an int (cudaStream_t) or an object "
                          f"with __cuda_stream__, got {type(stream).__name__}")


def view(obj, what, *, writable, stream=0):
    """The View of `obj` (named `what` in errors); `stream` (an int handle) is the one the
    call will run on, given to ``__dlpack__`` so the producer orders its writes before it."""
    if hasattr(obj, "__dlpack__"):
        try:
            return _from_dlpack(obj, what, writable, stream)
        except BufferError as err:  # a producer that cannot export this array over DLPack
            if not hasattr(obj, "__cuda_array_interface__") and not _has_buffer(obj):
                raise BufferTypeError(f"zcoll.core: {what}: __dlpack__ failed: {err}") from err
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array_interface(obj, what, writable, stream)
    if _has_buffer(obj):
        return _from_buffer(obj, what, writable)
    raise BufferTypeError(
        f"zcoll.core: {what} is a {type(obj).__name__}, which exports no array: pass an object "
        f"with __dlpack__ (NumPy, torch, JAX, CuPy), __cuda_array_interface__, or the buffer "
        f"protocol (bytearray, array.array, memoryview)")


def _has_buffer(obj):
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False


def _check_device(what, device_type):
    if device_type in (_dlpack.CPU, _dlpack.CUDA_HOST):
        return HOST
    if device_type in (_dlpack.CUDA, _dlpack.CUDA_MANAGED):
        if not _library.device_support():
            raise UnsupportedError(
                f"zcoll.core: {what} is CUDA memory, and this process's libzcoll "
                f"({_library.library_path()}) has no device support (a build without CUDA, or "
                f"no CUDA device or driver here: zcollGetDeviceSupport)")
        return DEVICE
    raise UnsupportedError(f"zcoll.core: {what} is on DLPack device type {device_type}: zcoll "
                           f"takes host (CPU, CUDA pinned) and CUDA memory")


def _check_writable(what, writable, read_only):
    if writable and read_only:
        raise ArgumentError(f"zcoll.core: {what} is read-only and is written by this call: "
                            f"pass a writable array")


def _dtype(what, code):
    if code is None:
        raise BufferTypeError(f"zcoll.core: {what}'s data type is not one zcoll takes "
                              f"({', '.join(dtypes.BY_NAME)})")
    return code


def _contiguous(shape, strides):
    """C-contiguous in elements? Dimensions of extent 1 may have any stride (DLPack's rule)."""
    if strides is None or 0 in shape:
        return True
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _count(shape):
    count = 1
    for extent in shape:
        count *= extent
    return count


# ---- DLPack -------------------------------------------------------------------------------

def _from_dlpack(obj, what, writable, stream):
    device_type, device_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") \
        else (_dlpack.CPU, 0)
    kind = _check_device(what, device_type)
    # DLPack's stream argument: None for host memory; for CUDA, the consumer's stream, where
    # 0 is ambiguous and spelled 1 (the legacy default stream).
    dl_stream = None if kind == HOST else (stream or 1)
    try:
        try:
            capsule = obj.__dlpack__(stream=dl_stream, max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0: the unversioned capsule only
            capsule = obj.__dlpack__(stream=dl_stream)
        imported = _dlpack.Imported(capsule)
    except BufferError:
        raise
    except Exception as err:  # e.g. torch refusing a tensor that requires grad
        raise BufferTypeError(f"zcoll.core: {what}: __dlpack__ failed: {err}") from err
    if _immutable(obj):
        imported.read_only = True
    try:
        return _dlpack_view(imported, what, writable, kind, device_id)
    except Exception:
        imported.release()
        raise


def _immutable(obj):
    """JAX arrays are immutable, and their DLPack export (the unversioned capsule) cannot say
    so: they are refused as outputs (read-only)."""
    return type(obj).__module__.split(".")[0] in ("jax", "jaxlib")


def _dlpack_view(imported, what, writable, kind, device_id):
    tensor = imported.tensor
    ndim = tensor.ndim
    shape = [tensor.shape[i] for i in range(ndim)]
    strides = [tensor.strides[i] for i in range(ndim)] if tensor.strides else None
    dtype = tensor.dtype
    if dtype.lanes != 1:
        raise BufferTypeError(f"zcoll.core: {what} has {dtype.lanes} lanes per element: zcoll "
                              f"takes one")
    code = dtypes.from_dlpack(dtype.code, dtype.bits)
    if code is None:
        raise BufferTypeError(
            f"zcoll.core: {what} is {dtypes.describe_dlpack(dtype.code, dtype.bits)}, not a data "
            f"type zcoll takes ({', '.join(dtypes.BY_NAME)})")
    if not _contiguous(shape, strides):
        raise ArgumentError(f"zcoll.core: {what} is not contiguous (shape {shape}, strides "
                            f"{strides} in elements): pass a C-contiguous array")
    _check_writable(what, writable, imported.read_only)
    if writable and imported.copied:
        raise ArgumentError(f"zcoll.core: {what} was exported as a copy (DLPack IS_COPIED): "
                            f"what this call writes would be lost; pass the array itself")
    address = (tensor.data or 0) + tensor.byte_offset
    return View(address, _count(shape), code, kind, device_id, imported.read_only,
                imported.release)


# ---- CUDA Array Interface v3 --------------------------------------------------------------

def _from_cuda_array_interface(obj, what, writable, stream):
    _check_device(what, _dlpack.CUDA)  # a CUDA array needs a libzcoll with device support
    cai = obj.__cuda_array_interface__
    shape = list(cai["shape"])
    code = _dtype(what, dtypes.from_typestr(cai["typestr"]))
    address, read_only = cai["data"]
    itemsize = dtypes.ITEMSIZE[code]
    strides = cai.get("strides")
    if strides is not None:
        if any(s % itemsize for s in strides):
            raise ArgumentError(f"zcoll.core: {what}'s strides {strides} are not whole elements")
        strides = [s // itemsize for s in strides]
    if not _contiguous(shape, strides):
        raise ArgumentError(f"zcoll.core: {what} is not contiguous (shape {shape}, strides "
                            f"{cai.get('strides')} in bytes): pass a C-contiguous array")
    _check_writable(what, writable, read_only)
    # v3's stream: the producer's stream the data is ordered on (None: ready now). zcoll.core
    # cannot make the call's stream wait for another one, so it must be the same.
    producer = cai.get("stream")
    if producer is not None and producer != (stream or 1) and not (producer in (1, 2) and
                                                                     stream == 0):
        raise ArgumentError(
            f"zcoll.core: {what}'s __cuda_array_interface__ names stream {producer:#x}, and the "
            f"call runs on stream {stream:#x}: pass stream={producer:#x}, or synchronize the "
            f"producer first")
    return View(address or 0, _count(shape), code, DEVICE, 0, bool(read_only))


# ---- buffer protocol ----------------------------------------------------------------------

class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_PYBUF_FORMAT, _PYBUF_C_CONTIGUOUS = 0x0004, 0x0038
_get_buffer = python_api("PyObject_GetBuffer", ctypes.c_int, ctypes.py_object,
                         ctypes.POINTER(_PyBuffer), ctypes.c_int)
_release_buffer = python_api("PyBuffer_Release", None, ctypes.POINTER(_PyBuffer))


def _from_buffer(obj, what, writable):
    with memoryview(obj) as probe:
        if not probe.c_contiguous:
            raise ArgumentError(f"zcoll.core: {what} is not contiguous (strides "
                                f"{probe.strides}): pass a C-contiguous buffer")
        code = _dtype(what, dtypes.from_format(probe.format, probe.itemsize))
        _check_writable(what, writable, probe.readonly)
    # The address of a read-only buffer too (ctypes' from_buffer wants a writable one); the
    # Py_buffer is held until release(), so the object cannot be resized meanwhile.
    pybuf = _PyBuffer()
    _get_buffer(obj, ctypes.byref(pybuf), _PYBUF_FORMAT | _PYBUF_C_CONTIGUOUS)
    return View(pybuf.buf or 0, pybuf.len // dtypes.ITEMSIZE[code], code, HOST, 0,
                bool(pybuf.readonly),
                lambda: _release_buffer(ctypes.byref(pybuf)))
