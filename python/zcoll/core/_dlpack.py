"""DLPack's C structures (dlpack.h v1.x) over ctypes, and capsule handling both ways.

Consuming: a "dltensor_versioned" capsule holds a DLManagedTensorVersioned, a "dltensor" one a
DLManagedTensor. The consumer renames the capsule "used_..." (so its destructor no longer frees
the tensor) and calls the tensor's deleter once done with the memory.
Producing: :func:`export` makes a capsule whose destructor calls the deleter unless a consumer
renamed it, and whose deleter drops the reference that keeps the memory alive.
"""
import ctypes

VERSIONED = b"dltensor_versioned"
USED_VERSIONED = b"used_dltensor_versioned"
UNVERSIONED = b"dltensor"
USED_UNVERSIONED = b"used_dltensor"

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1

CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13
MAJOR_VERSION, MINOR_VERSION = 1, 0


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.c_void_p)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


def python_api(name, restype, *argtypes):
    """A private prototype of a C-API function: setting argtypes on ctypes.pythonapi's shared
    attributes would be undone by any other library that does the same (jax.ffi.pycapsule sets
    PyCapsule_New's), and would undo theirs."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Api:
    PyCapsule_IsValid = python_api("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object,
                                   ctypes.c_char_p)
    PyCapsule_GetPointer = python_api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object,
                                      ctypes.c_char_p)
    PyCapsule_SetName = python_api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object,
                                   ctypes.c_char_p)
    PyCapsule_GetName = python_api("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
    PyCapsule_New = python_api("PyCapsule_New", ctypes.py_object, ctypes.c_void_p,
                               ctypes.c_char_p, _CAPSULE_DESTRUCTOR)


_api = _Api


class Imported:
    """A consumed capsule: the DLTensor (`tensor`), the read-only and copied flags, and
    release(), which calls the producer's deleter once (also at garbage collection)."""

    def __init__(self, capsule):
        if _api.PyCapsule_IsValid(capsule, VERSIONED):
            managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, VERSIONED),
                                  ctypes.POINTER(DLManagedTensorVersioned))
            version = managed.contents.version
            if version.major != MAJOR_VERSION:
                raise ValueError(f"DLPack {version.major}.{version.minor} (this reader "
                                 f"takes {MAJOR_VERSION}.x)")
            self.read_only = bool(managed.contents.flags & FLAG_READ_ONLY)
            self.copied = bool(managed.contents.flags & FLAG_IS_COPIED)
            used = USED_VERSIONED
        elif _api.PyCapsule_IsValid(capsule, UNVERSIONED):
            managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, UNVERSIONED),
                                  ctypes.POINTER(DLManagedTensor))
            self.read_only = self.copied = False  # the unversioned struct cannot say so
            used = USED_UNVERSIONED
        else:
            name = _api.PyCapsule_GetName(capsule) if _is_capsule(capsule) else None
            raise ValueError(f"__dlpack__ returned {type(capsule).__name__} "
                             f"(capsule name {name!r}), not a DLPack capsule")
        self.tensor = managed.contents.dl_tensor
        self._managed = managed
        _api.PyCapsule_SetName(capsule, used)  # the producer's destructor now leaves it alone
        self._deleter = managed.contents.deleter

    def release(self):
        deleter, self._deleter = self._deleter, None
        if deleter:
            DELETER(deleter)(ctypes.cast(self._managed, ctypes.c_void_p))

    def __del__(self):
        self.release()


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


# ---- producing ----------------------------------------------------------------------------

# Exported tensors alive in consumers: address of the DLManagedTensorVersioned -> its parts
# (struct, shape/strides arrays, the owner kept alive). The deleter removes the entry.
_live = {}


@DELETER
def _deleter(address):
    _live.pop(address, None)


# The capsule destructor gets the capsule while it is being freed: it is read through raw
# pointers (c_void_p), never turned back into a Python object.
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # A capsule nobody consumed still has its first name: free what it holds. A consumed one
    # was renamed "used_..." and its consumer calls the deleter.
    for name in (VERSIONED, UNVERSIONED):
        if _raw_is_valid(capsule, name):
            _live.pop(_raw_get_pointer(capsule, name), None)
            return


def export(owner, data, device, shape, dtype_code, dtype_bits, read_only, versioned):
    """A capsule exporting `data` (an address) as a C-contiguous tensor of `shape`; `owner` is
    kept alive until the consumer calls the deleter (or the capsule is dropped unconsumed)."""
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * max(ndim, 1))(*shape)
    tensor = DLTensor(data=data, device=DLDevice(*device), ndim=ndim,
                      dtype=DLDataType(dtype_code, dtype_bits, 1),
                      shape=ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64)),
                      strides=None, byte_offset=0)
    deleter = ctypes.cast(_deleter, ctypes.c_void_p).value
    if versioned:
        managed = DLManagedTensorVersioned(
            version=DLPackVersion(MAJOR_VERSION, MINOR_VERSION), manager_ctx=None,
            deleter=deleter, flags=FLAG_READ_ONLY if read_only else 0, dl_tensor=tensor)
        name = VERSIONED
    else:
        managed = DLManagedTensor(dl_tensor=tensor, manager_ctx=None, deleter=deleter)
        name = UNVERSIONED
    address = ctypes.addressof(managed)
    _live[address] = (managed, shape_array, owner)
    return _api.PyCapsule_New(address, name, _capsule_destructor)
