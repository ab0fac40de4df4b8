"""zcoll.core's tests (ctest: python.core). The multi-rank checks run in ranks_core.py under
tools/zcollrun (4 ranks, 2 emulated nodes); the rest run in this process or in a Python that
cannot import torch. zcoll.core is the installed one (tools/install_python.sh)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zcoll
import zcoll.core as zc
from zcoll.core import _dlpack, arrays, dtypes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent

try:
    import torch
except ImportError:
    torch = None


def test_ranks_under_zcollrun():
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "zcollrun"), "-n", "4", "--nodes", "2",
         "--timeout", "150", sys.executable, str(HERE / "ranks_core.py")],
        capture_output=True, text=True, timeout=200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert run.stdout.count("ranks_core OK") == 4, run.stdout[-4000:]


def test_empty_is_zero_copy_and_freed_with_its_last_consumer():
    live = len(_dlpack._live)
    a = zc.empty((4, 256), "float32")
    n = np.from_dlpack(a)  # DLPack 1.x (versioned) capsule
    assert n.ctypes.data == a.address and n.shape == (4, 256) and not n.any()
    assert np.asarray(a).ctypes.data == a.address  # __array_interface__
    n[:] = 2.0
    assert (np.frombuffer(a.memoryview(), np.float32) == 2.0).all()
    if torch is not None:
        t = torch.from_dlpack(a)
        assert t.data_ptr() == a.address and t.dtype == torch.float32
        b = torch.from_dlpack(zc.empty(8, "bfloat16"))
        assert b.dtype == torch.bfloat16 and (b == 0).all()
        del t, b
    address = a.address
    del a  # n still holds the memory
    assert n.ctypes.data == address and (n == 2.0).all()
    del n
    assert len(_dlpack._live) == live


def test_empty_exports_the_unversioned_capsule_too():
    a = zc.empty(16, "int32")
    capsule = a.__dlpack__()  # no max_version: a pre-1.0 consumer
    assert _dlpack._api.PyCapsule_IsValid(capsule, _dlpack.UNVERSIONED)
    v = _dlpack.Imported(capsule)
    assert v.tensor.data == a.address and v.tensor.ndim == 1
    v.release()
    with pytest.raises(zc.UnsupportedError):
        zc.empty(4, "float32", device="cuda")
    with pytest.raises(zc.ArgumentError):
        zc.empty((-1,), "float32")


class _OldProducer:
    """A DLPack producer from before 1.0: __dlpack__ takes no max_version."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_unversioned_producer_is_read_and_released():
    x = np.arange(10, dtype=np.float64)
    refs = sys.getrefcount(x)
    v = arrays.view(_OldProducer(x), "x", writable=True)
    assert (v.address, v.count, v.dtype) == (x.ctypes.data, 10, dtypes.FLOAT64)
    assert sys.getrefcount(x) == refs + 1  # the capsule's tensor holds x ...
    v.release()
    assert sys.getrefcount(x) == refs  # ... until the deleter ran


def test_other_libraries_prototypes_of_the_c_api_do_not_break_it():
    # jax.ffi.pycapsule sets its own argtypes on the process-wide ctypes.pythonapi.PyCapsule_New
    # (and others may on PyObject_GetBuffer): zcoll.core keeps private prototypes.
    import ctypes
    saved = (ctypes.pythonapi.PyCapsule_New.argtypes, ctypes.pythonapi.PyCapsule_New.restype,
             ctypes.pythonapi.PyObject_GetBuffer.argtypes)
    try:
        ctypes.pythonapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                   ctypes.c_void_p]
        ctypes.pythonapi.PyCapsule_New.restype = ctypes.py_object
        ctypes.pythonapi.PyObject_GetBuffer.argtypes = [ctypes.c_void_p]
        x = zc.empty(4)
        view = np.from_dlpack(x)
        view[:] = [1, 2, 3, 4]
        assert np.array_equal(np.from_dlpack(x), [1, 2, 3, 4])
        assert arrays.view(bytes(16), "send", writable=False).count == 16  # read-only buffer
    finally:
        (ctypes.pythonapi.PyCapsule_New.argtypes, ctypes.pythonapi.PyCapsule_New.restype,
         ctypes.pythonapi.PyObject_GetBuffer.argtypes) = saved


def test_buffer_protocol_dtypes_and_byte_offset():
    import array
    for code, dtype in (("b", dtypes.INT8), ("B", dtypes.UINT8), ("i", dtypes.INT32),
                        ("q", dtypes.INT64), ("f", dtypes.FLOAT32), ("d", dtypes.FLOAT64)):
        v = arrays.view(array.array(code, [1, 2]), "x", writable=False)
        assert (v.dtype, v.count) == (dtype, 2)
        v.release()
    x = np.arange(8, dtype=np.float32)
    v = arrays.view(x[3:], "x", writable=False)  # an offset view: its own first element
    assert v.address == x.ctypes.data + 12 and v.count == 5
    v.release()
    with pytest.raises(zc.BufferTypeError, match="data type"):
        arrays.view(array.array("h", [1]), "x", writable=False)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_dlpack_dtype_codes_from_torch():
    expected = {torch.float32: dtypes.FLOAT32, torch.float16: dtypes.FLOAT16,
                torch.bfloat16: dtypes.BFLOAT16, torch.float64: dtypes.FLOAT64,
                torch.int8: dtypes.INT8, torch.uint8: dtypes.UINT8, torch.int32: dtypes.INT32,
                torch.int64: dtypes.INT64}
    for torch_dtype, code in expected.items():
        t = torch.zeros(3, 4, dtype=torch_dtype)[1:]  # byte_offset or a moved data pointer
        v = arrays.view(t, "x", writable=True)
        assert (v.dtype, v.count, v.address) == (code, 8, t.data_ptr()), torch_dtype
        v.release()
    for bad in (torch.bool, torch.complex64, torch.int16):
        with pytest.raises(zc.BufferTypeError):
            arrays.view(torch.zeros(2, dtype=bad), "x", writable=False)
    with pytest.raises(zc.ArgumentError, match="contiguous"):
        arrays.view(torch.zeros(4, 4).t(), "x", writable=False)


def test_versions_agree():
    text = (ROOT / "python" / "core" / "pyproject.toml").read_text()
    project = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert zcoll.__version__ == project == zc.version()


NO_TORCH_SCRIPT = """
import array, os, sys
sys.path.insert(0, sys.argv[1])
try:
    import torch
    raise SystemExit("torch is importable here")
except ImportError:
    pass
import zcoll.core as zc
assert not {"torch", "numpy", "jax"} & set(sys.modules), sorted(sys.modules)
os.environ.update(RANK="0", WORLD_SIZE="1")
with zc.Communicator.from_env() as comm:
    out = bytearray(4)
    comm.all_gather(b"abcd", out)
    assert out == b"abcd"
    q = array.array("f", bytes(1024))
    comm.quantized_all_gather(array.array("f", [0.5] * 256), q)
    assert q.tolist() == [0.5] * 256
    try:
        zc.empty(4, "float32").__dlpack__(stream=1)
    except BufferError:
        pass
import zcoll
try:
    zcoll.register
except ImportError as err:
    assert "torch" in str(err)
print("import without torch OK")
"""


def test_import_without_torch(tmp_path):
    """zcoll.core in a Python that cannot import torch (-I -S: no site-packages; the installed
    zcoll package alone on the path, through a link)."""
    (tmp_path / "zcoll").symlink_to(Path(zcoll.__file__).parent)
    run = subprocess.run([sys.executable, "-I", "-S", "-c", NO_TORCH_SCRIPT, str(tmp_path)],
                         capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr


def test_jax_arrays_are_inputs_not_outputs():
    """JAX arrays are immutable (their unversioned DLPack capsule cannot say so): refused as
    outputs, read as inputs, and jax sees empty()'s memory without a copy."""
    jnp = pytest.importorskip("jax.numpy")
    import jax
    x = jnp.arange(6, dtype=jnp.bfloat16)
    v = arrays.view(x, "x", writable=False)
    assert (v.dtype, v.count, v.address) == (dtypes.BFLOAT16, 6, x.unsafe_buffer_pointer())
    v.release()
    with pytest.raises(zc.ArgumentError, match="read-only"):
        arrays.view(jnp.zeros(4), "out", writable=True)
    a = zc.empty(8, "float32")
    assert jax.dlpack.from_dlpack(a).unsafe_buffer_pointer() == a.address
