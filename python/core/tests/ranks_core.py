"""Run by test_core.py under tools/zcollrun (4 ranks on 2 emulated nodes): every check of
zcoll.core that needs ranks. The reference for "bit-identical to the C API" is the same C call
made here through raw ctypes, with addresses, counts, data type codes and zcollQuantConfig_t
written by hand (not by zcoll.core), on the same input bits. Prints "ranks_core OK"."""
import array
import ctypes
import threading
import time

import numpy as np

import zcoll.core as zc

try:
    import torch
except ImportError:
    torch = None

lib = ctypes.CDLL(zc.library_path())  # the same library zcoll.core loaded (one instance)
F32, BF16, U8 = 7, 9, 1


class Quant(ctypes.Structure):  # zcollQuantConfig_t, as include/zcoll/zcoll.h lays it out
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("bits", ctypes.c_int), ("intraBits", ctypes.c_int), ("blockSize", ctypes.c_int),
                ("mode", ctypes.c_int), ("rounding", ctypes.c_int), ("seed", ctypes.c_ulonglong),
                ("pipelineDepth", ctypes.c_int)]


def quant(bits=0, intra=0, block=0):
    return ctypes.byref(Quant(ctypes.sizeof(Quant), 0x7A717566, 100, bits, intra, block, 0, 0, 0,
                              0))


def ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


def ok(result, what):
    assert result == 0, f"{what}: {result} {lib.zcollGetLastError(None)}"


def rng(rank, n, seed):
    return np.random.default_rng(seed * 100 + rank).standard_normal(n).astype(np.float32)


def as_bf16_bits(x):  # float32 -> bfloat16 bits (uint16), round to nearest even as torch does
    return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def check_all_gather(comm, h, r, w):
    x = rng(r, 1000, 1)
    ref = np.empty(1000 * w, np.float32)
    ok(lib.zcollAllGather(ptr(x), ptr(ref), ctypes.c_size_t(1000), F32, h, None), "ref")
    outs = {"numpy": np.empty_like(ref), "empty()": zc.empty(ref.shape, "float32")}
    comm.all_gather(x, outs["numpy"])
    comm.all_gather(x, outs["empty()"])
    inp = array.array("f", x.tobytes())
    outs["array.array"] = array.array("f", bytes(ref.nbytes))
    comm.all_gather(inp, outs["array.array"])
    outs["bytearray"] = bytearray(ref.nbytes)
    comm.all_gather(bytearray(x.tobytes()), outs["bytearray"])  # uint8: the same bytes
    if torch is not None:
        outs["torch"] = torch.empty(ref.shape, dtype=torch.float32)
        comm.all_gather(torch.from_numpy(x), outs["torch"])
    for name, out in outs.items():
        assert bytes(memoryview(np.from_dlpack(out) if hasattr(out, "__dlpack__") else out)
                     ) == ref.tobytes(), name
    if torch is not None:  # bf16 through torch (DLPack code 4) vs the raw call on its bits
        bits = as_bf16_bits(x)
        ref16 = np.empty(1000 * w, np.uint16)
        ok(lib.zcollAllGather(ptr(bits), ptr(ref16), ctypes.c_size_t(1000), BF16, h, None), "r")
        out = torch.empty(1000 * w, dtype=torch.bfloat16)
        comm.all_gather(torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16), out)
        assert (out.view(torch.int16).numpy().view(np.uint16) == ref16).all()
    return len(outs) + (torch is not None)


def check_standard(comm, r, w):
    """The exact collectives against values computed here, with send/recv in a blocking group."""
    x = np.arange(8 * w, dtype=np.int64) * (r + 1)  # rank r holds (r+1) * [0, 8w)
    total = np.arange(8 * w, dtype=np.int64) * (w * (w + 1) // 2)
    out = np.empty(8, np.int64)
    comm.reduce_scatter(x, out)
    assert (out == total[8 * r:8 * (r + 1)]).all()
    full = np.empty(8 * w, np.int64)
    comm.all_reduce(x, full, op="max")
    assert (full == np.arange(8 * w) * w).all()
    comm.reduce(x, full if r == 1 else None, root=1)
    if r == 1:
        assert (full == total).all()
    b = np.full(5, r, np.float64)
    comm.broadcast(b if r == 2 else None, b, root=2)
    assert (b == 2).all()
    g = np.empty(3 * w, np.int32) if r == 0 else None
    comm.gather(np.full(3, r, np.int32), g, root=0)
    if r == 0:
        assert (g == np.repeat(np.arange(w), 3)).all()
    s = np.empty(2, np.uint8)
    comm.scatter(np.repeat(np.arange(w, dtype=np.uint8), 2) if r == 3 else None, s, root=3)
    assert (s == r).all()
    a = np.empty(2 * w, np.int32)
    comm.all_to_all(np.arange(2 * w, dtype=np.int32) + 100 * r, a)
    assert (a == np.array([[100 * p + 2 * r, 100 * p + 2 * r + 1] for p in range(w)]).ravel()).all()
    got = np.empty(4, np.float32)
    with zc.group():  # a ring: each rank sends to the next and receives from the previous
        comm.send(np.full(4, r, np.float32), (r + 1) % w)
        comm.recv(got, (r - 1) % w)
    assert (got == (r - 1) % w).all()


def check_qwz(comm, h, r, w):
    x = rng(r, 4096, 2)
    ref = np.empty(4096 * w, np.float32)
    ok(lib.zcollQuantizedAllGather(ptr(x), ptr(ref), ctypes.c_size_t(4096), F32, None, h, None),
       "ref")
    out = zc.empty(ref.shape, "float32")
    comm.quantized_all_gather(x, out)
    assert np.from_dlpack(out).tobytes() == ref.tobytes()
    ok(lib.zcollQuantizedAllGather(ptr(x), ptr(ref), ctypes.c_size_t(4096), F32,
                                   quant(4, 0, 64), h, None), "ref4")
    out = np.empty_like(ref)
    comm.quantized_all_gather(array.array("f", x.tobytes()), out, bits=4, block_size=64)
    assert out.tobytes() == ref.tobytes()
    if torch is not None:
        bits = as_bf16_bits(x)
        ref16 = np.empty(4096 * w, np.uint16)
        ok(lib.zcollQuantizedAllGather(ptr(bits), ptr(ref16), ctypes.c_size_t(4096), BF16,
                                       quant(4, 0, 64), h, None), "ref16")
        out16 = torch.empty(4096 * w, dtype=torch.bfloat16)
        comm.quantized_all_gather(torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16),
                                  out16, bits=4, block_size=64)
        assert (out16.view(torch.int16).numpy().view(np.uint16) == ref16).all()


def check_hpz(comm, h, r, w):
    x = rng(r, 1024, 3)
    ref, sec_ref = np.empty(1024 * w, np.float32), np.empty(comm.node_count * 1024, np.float32)
    ok(lib.zcollAllGatherHier(ptr(x), ptr(ref), ptr(sec_ref), ctypes.c_size_t(1024), F32,
                              None, h, None), "ref")
    out, sec = np.empty_like(ref), np.empty(comm.secondary_shard_count(1024), np.float32)
    comm.all_gather_hier(x, out, sec, quantized=False)
    assert out.tobytes() == ref.tobytes() and sec.tobytes() == sec_ref.tobytes()
    back = zc.empty(ref.shape, "float32")
    comm.all_gather_from_secondary(sec, back)
    assert np.from_dlpack(back).tobytes() == ref.tobytes()
    comm.all_gather_hier(x, out, sec, bits=8)
    ok(lib.zcollAllGatherHier(ptr(x), ptr(ref), ptr(sec_ref), ctypes.c_size_t(1024), F32,
                              quant(8), h, None), "refq")
    assert out.tobytes() == ref.tobytes()


def check_qgz(comm, h, r, w):
    x = rng(r, 4096 * w, 4)
    ref = np.empty(4096, np.float32)
    ok(lib.zcollQuantizedReduceScatter(ptr(x), ptr(ref), ctypes.c_size_t(4096), F32, 0, None,
                                       h, None), "ref")
    out = np.empty_like(ref)
    comm.quantized_reduce_scatter(x, out)
    assert out.tobytes() == ref.tobytes()
    ok(lib.zcollQuantizedReduceScatter(ptr(x), ptr(ref), ctypes.c_size_t(4096), F32, 4,
                                       quant(8, 8, 128), h, None), "ref avg")
    comm.quantized_reduce_scatter(x, out, "avg", bits=8, intra_bits=8, block_size=128)
    assert out.tobytes() == ref.tobytes()
    if torch is not None:
        bits = as_bf16_bits(x)
        ref16 = np.empty(4096, np.uint16)
        ok(lib.zcollQuantizedReduceScatter(ptr(bits), ptr(ref16), ctypes.c_size_t(4096), BF16,
                                           0, None, h, None), "ref16")
        out16 = torch.empty(4096, dtype=torch.bfloat16)
        comm.quantized_reduce_scatter(torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16),
                                      out16)
        assert (out16.view(torch.int16).numpy().view(np.uint16) == ref16).all()


def check_quantized_all_reduce(comm, h, r, w):
    n = 100_000  # 400 KB per rank: above the 256 KiB exact threshold, so quantized
    x = rng(r, n, 5)
    ref = np.empty(n, np.float32)
    ok(lib.zcollQuantizedAllReduce(ptr(x), ptr(ref), ctypes.c_size_t(n), F32, 0, None, h,
                                   None), "ref")
    out = np.empty_like(ref)
    comm.quantized_all_reduce(x, out)
    assert out.tobytes() == ref.tobytes()
    assert np.abs(out - x).max() > 0  # it did reduce
    size = comm.quantized_all_reduce_residual_size(n, "float32")
    res_ref, res = np.zeros(size, np.uint8), zc.empty(size, "uint8")
    for _ in range(2):  # the second call uses the residual the first one kept
        ok(lib.zcollQuantizedAllReduceWithResidual(ptr(x), ptr(ref), ctypes.c_size_t(n), F32, 0,
                                                   None, ptr(res_ref), ctypes.c_size_t(size), h,
                                                   None), "ref residual")
        comm.quantized_all_reduce(x, out, residual=res)
        assert out.tobytes() == ref.tobytes()
    assert np.from_dlpack(res).tobytes() == res_ref.tobytes()


class FakeCudaArray:  # a CUDA array as CuPy or Numba would describe it
    __cuda_array_interface__ = {"shape": (1000,), "typestr": "<f4", "data": (0x7F0000000000,
                                False), "version": 3, "strides": None, "stream": None}


def check_bad_input(comm, r, w):
    x = np.ones(1000, np.float32)
    out = np.full(1000 * w, 7.0, np.float32)
    readonly = out.copy()
    readonly.flags.writeable = False
    cases = [
        (lambda: comm.all_gather(x, np.empty(1000 * w)), zc.ArgumentError, "share a data type"),
        (lambda: comm.all_gather(np.ones(1000, np.int16), out), zc.BufferTypeError, "data type"),
        (lambda: comm.all_gather(x, readonly), zc.ArgumentError, "read-only"),
        (lambda: comm.all_gather(x, bytes(4000 * w)), zc.ArgumentError, "read-only"),
        (lambda: comm.all_gather(x, out[:-1]), zc.ArgumentError, "elements"),
        (lambda: comm.all_gather(np.ones(2000, np.float32)[::2], out), zc.ArgumentError,
         "contiguous"),
        (lambda: comm.all_gather(FakeCudaArray(), out), zc.UnsupportedError, "device support"),
        (lambda: comm.all_gather(object(), out), TypeError, "exports no array"),
        (lambda: comm.quantized_all_gather(x.astype(np.int32), out.view(np.int32)),
         zc.ArgumentError, ""),  # zcoll refuses int32 for qwZ: zcollInvalidArgument
        (lambda: comm.quantized_all_gather(x, out, bits=5), zc.ArgumentError, ""),
        (lambda: comm.all_reduce(x, x, op="mean"), ValueError, "op must be"),
    ]
    if torch is not None:
        cases.append((lambda: comm.all_gather(torch.ones(2, 500)[:, ::2], out),
                      zc.ArgumentError, "contiguous"))
    for i, (call, kind, words) in enumerate(cases):
        try:
            call()
        except kind as err:
            assert words in str(err), (i, err)
        else:
            raise AssertionError(f"bad-input case {i} raised nothing")
        assert (out == 7.0).all(), f"case {i} wrote to the output"
    comm.all_gather(x, out)  # the communicator still works
    assert (out == 1.0).all()
    return len(cases)


def check_nonblocking_group(comm, r, w):
    x = np.full(64, r + 1, np.float32)
    a, b = np.empty(64, np.float32), np.empty(64 * w, np.float32)
    with comm.group(nonblocking=True) as g:
        comm.all_reduce(x, a)
        comm.all_gather(bytearray(x.tobytes()), memoryview(b).cast("B"))
    g.request.wait()
    assert (a == w * (w + 1) / 2).all() and g.request.test()
    assert (b.reshape(w, 64) == np.arange(1, w + 1, dtype=np.float32)[:, None]).all()


def check_gil_released(comm, r):
    """Rank 0 blocks in barrier() while the others sleep 0.5 s: a Python thread on rank 0 must
    run meanwhile (ctypes releases the GIL)."""
    counter, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    if r != 0:
        time.sleep(0.5)
        comm.barrier()
        return
    thread = threading.Thread(target=count)
    thread.start()
    time.sleep(0.05)
    before = counter[0]
    start = time.monotonic()
    comm.barrier()
    blocked = time.monotonic() - start
    during = counter[0] - before
    stop.set()
    thread.join()
    assert blocked > 0.3 and during > 10_000, (blocked, during)
    print(f"GIL: barrier blocked {blocked:.2f} s, the other thread counted {during} meanwhile")


def check_split(comm, r, w):
    sub = comm.split(r % 2, key=r)
    with sub:
        assert sub.size == w // 2 and sub.rank == r // 2
        out = np.empty(sub.size, np.int64)
        sub.all_gather(np.array([r], np.int64), out)
        assert list(out) == [q for q in range(w) if q % 2 == r % 2]


def check_init_shrink_abort(comm, r, w):
    """Communicator.init with an id rank 0 made (sent over comm), then shrink and abort."""
    uid = bytearray(zc.get_unique_id() if r == 0 else bytes(128))
    comm.broadcast(uid, uid, root=0)
    with zc.Communicator.init(w, r, bytes(uid), config={"name": "core-test"}) as fresh:
        assert (fresh.rank, fresh.size) == (r, w)
        small = fresh.shrink([w - 1])
        if r == w - 1:
            assert small is None
        else:
            assert (small.rank, small.size) == (r, w - 1)
            out = np.empty(w - 1, np.int32)
            small.all_gather(np.array([r * r], np.int32), out)
            assert list(out) == [q * q for q in range(w - 1)]
        comm.barrier()  # every rank is out of small's calls: aborting it now fails nobody
        if small is not None:
            small.abort()
            try:
                small.handle
                raise AssertionError("an aborted communicator still has a handle")
            except zc.ArgumentError:
                pass
    try:
        zc.Communicator.init(w, r, b"short")
        raise AssertionError("a short unique id was taken")
    except zc.ArgumentError:
        pass


def main():
    with zc.Communicator.from_env() as comm:
        r, w, h = comm.rank, comm.size, ctypes.c_void_p(comm.handle)
        assert w == 4 and comm.node_count == 2
        kinds = check_all_gather(comm, h, r, w)
        check_standard(comm, r, w)
        check_qwz(comm, h, r, w)
        check_hpz(comm, h, r, w)
        check_qgz(comm, h, r, w)
        check_quantized_all_reduce(comm, h, r, w)
        bad = check_bad_input(comm, r, w)
        check_nonblocking_group(comm, r, w)
        check_gil_released(comm, r)
        check_split(comm, r, w)
        check_init_shrink_abort(comm, r, w)
        print(f"ranks_core OK ({kinds} input kinds, {bad} bad-input cases, torch "
              f"{'used' if torch else 'absent'})")


main()
