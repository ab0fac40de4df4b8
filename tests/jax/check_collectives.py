"""zcoll.jax on every rank of `tools/zcollrun -n 4 --nodes 2` (ctest jax.collectives):

1. inside jax.jit (the XLA FFI handlers) each collective gives the same bits as outside jit
   (zcoll.core over DLPack), and the same bits as zcoll.core on NumPy / registered-memory
   copies of the same data (the C API's results), bfloat16 included;
2. the unquantized ones equal the exact answer, qwZ stays within its bound;
3. collectives with no data dependency in one jit run in program order (their tokens chain;
   ZCOLL_CHECK_CALLS=on, set by ctest, turns any reordering across ranks into an error);
4. bad input raises a clear exception before anything is sent, and a handler's own check
   fails the computation with zcoll's message; the communicator works afterwards.
Exits non-zero (an AssertionError) on the first failure."""
import ctypes
import re

import jax
import jax.numpy as jnp
import numpy as np

import zcoll.core as zc
import zcoll.jax as zj
from zcoll.jax import _primitives

comm = zc.Communicator.from_env()
RANK, SIZE, NODES = comm.rank, comm.size, comm.node_count
N = 512  # elements per rank: two quantization blocks of 256


def data(rank, n, dtype, salt=0):
    rng = np.random.default_rng(1000 * salt + rank)
    return jnp.asarray((rng.standard_normal(n) * (1 + rank)).astype(np.float32)).astype(dtype)


def bits_of(x):
    """An array's raw bits as unsigned integers (bitwise comparison, bf16 included)."""
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def same_bits(a, b, what):
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
    assert np.array_equal(bits_of(a), bits_of(b)), (what, RANK)


def core_copy(x):
    """A zcoll.core.empty array holding x's bytes (how NumPy-side code hands bf16 to zcoll)."""
    x = np.asarray(x)
    out = zc.empty(x.shape, x.dtype.name)
    ctypes.memmove(out.address, x.ctypes.data, x.nbytes)
    return out


def from_core(arr, dtype):
    raw = np.frombuffer(arr.memoryview(), dtype=np.uint8).copy()
    return raw.view(bits_of(np.zeros(1, dtype)).dtype).view(dtype).reshape(arr.shape)


def check_jit_equals_eager_and_core():
    for dtype in (jnp.float32, jnp.bfloat16):
        x = data(RANK, N, dtype)
        full = jnp.concatenate([data(r, N, dtype) for r in range(SIZE)])
        cases = {
            "all_gather": (lambda v: zj.all_gather(v, comm), x, "all_gather", {}),
            "quantized_all_gather": (lambda v: zj.quantized_all_gather(v, comm, bits=8), x,
                                     "quantized_all_gather", {"bits": 8}),
            "quantized_all_gather4": (lambda v: zj.quantized_all_gather(v, comm, bits=4,
                                                                       block_size=64), x,
                                      "quantized_all_gather", {"bits": 4, "block_size": 64}),
            "quantized_reduce_scatter": (lambda v: zj.quantized_reduce_scatter(v, comm), full,
                                         "quantized_reduce_scatter", {}),
            "quantized_reduce_scatter_avg8": (
                lambda v: zj.quantized_reduce_scatter(v, comm, "avg", bits=8, intra_bits=8),
                full, "quantized_reduce_scatter", {"op": "avg", "bits": 8, "intra_bits": 8}),
        }
        for name, (fn, arg, method, kwargs) in cases.items():
            jitted = jax.jit(fn)(arg)
            eager = fn(arg)
            same_bits(jitted, eager, f"{name} jit vs eager {dtype.__name__}")
            # zcoll.core on a registered-memory copy of the same bytes: the C API's result.
            out = zc.empty(jitted.shape, np.dtype(dtype).name)
            getattr(comm, method)(core_copy(arg), out, **kwargs)
            same_bits(jitted, from_core(out, np.dtype(dtype)), f"{name} jit vs core {dtype}")
        exact = jax.jit(lambda v: zj.all_gather(v, comm))(x)
        same_bits(exact, full, f"all_gather exact {dtype.__name__}")
        check_qwz_bound(jax.jit(lambda v: zj.quantized_all_gather(v, comm))(x), full)


def check_qwz_bound(got, full, block=256, qmax=127):
    """docs/ZEROPP.md: |x' - x| <= scale/2 (+ the output type's rounding), scale per block."""
    x = np.asarray(full, np.float64).reshape(-1, block)
    y = np.asarray(got, np.float64).reshape(-1, block)
    scale = np.abs(x).max(axis=1, keepdims=True) / qmax
    ulp = np.abs(y) * float(jnp.finfo(got.dtype).eps) + 1e-30
    assert np.all(np.abs(y - x) <= scale * (0.5 + 2**-15) + ulp), ("qwZ bound", RANK)


def check_standard_and_hpz():
    x = data(RANK, N, jnp.float32, salt=1)
    xs = [data(r, N, jnp.float32, salt=1) for r in range(SIZE)]
    full = jnp.concatenate(xs)

    @jax.jit
    def step(x, full):
        # No data dependencies between these: only the ordered effect keeps them in order.
        rs = zj.reduce_scatter(full, comm, "sum")
        ar = zj.all_reduce(x, comm, "max")
        a2a = zj.all_to_all(x, comm)
        bc = zj.broadcast(x, comm, root=SIZE - 1)
        g, sec = zj.all_gather_hier(x, comm, quantized=False)
        back = zj.all_gather_from_secondary(sec, comm)
        qar = zj.quantized_all_reduce(full, comm, "avg")
        return rs, ar, a2a, bc, g, sec, back, qar

    text = step.lower(x, full).as_text()
    # The token chain: call k takes the token call k-1 returned (%<k-1>#0).
    calls = re.findall(r"%(\d+):\d+ = stablehlo.custom_call @zcoll_\w+\((%[\w#]+)", text)
    assert len(calls) == 7, text
    for k, (result, token) in enumerate(calls):
        assert result == str(k) and token == ("%arg0" if k == 0 else f"%{k - 1}#0"), text
    rs, ar, a2a, bc, g, sec, back, qar = step(x, full)
    blk = N // SIZE
    # reduce_scatter: every rank sent `full`; this rank's block of it, times SIZE.
    rows = full.shape[0] // SIZE
    assert np.array_equal(np.asarray(rs), np.asarray(full)[RANK * rows:(RANK + 1) * rows] * SIZE)
    assert np.array_equal(np.asarray(ar), np.max(np.stack(xs), axis=0))
    want_a2a = np.concatenate([np.asarray(xs[p])[RANK * blk:(RANK + 1) * blk]
                               for p in range(SIZE)])
    assert np.array_equal(np.asarray(a2a), want_a2a)
    assert np.array_equal(np.asarray(bc), np.asarray(xs[SIZE - 1]))
    assert np.array_equal(np.asarray(g), np.asarray(full))
    assert sec.shape == (NODES * N,)
    same_bits(back, g, "all_gather_from_secondary vs all_gather_hier")
    assert qar.shape == full.shape
    eager = {"reduce_scatter": (rs, zj.reduce_scatter(full, comm, "sum")),
             "all_reduce": (ar, zj.all_reduce(x, comm, "max")),
             "all_to_all": (a2a, zj.all_to_all(x, comm)),
             "broadcast": (bc, zj.broadcast(x, comm, root=SIZE - 1)),
             "all_gather_hier": (g, zj.all_gather_hier(x, comm, quantized=False)[0]),
             "all_gather_from_secondary": (back, zj.all_gather_from_secondary(sec, comm)),
             "quantized_all_reduce": (qar, zj.quantized_all_reduce(full, comm, "avg"))}
    for name, (jitted, eager_result) in eager.items():
        same_bits(jitted, eager_result, f"{name} jit vs eager")
    # hpZ quantized: forward and backward agree, jit and eager agree.
    gq, secq = jax.jit(lambda v: zj.all_gather_hier(v, comm, bits=8))(x)
    same_bits(jax.jit(lambda s: zj.all_gather_from_secondary(s, comm))(secq), gq, "hpZ q back")
    same_bits(zj.all_gather_hier(x, comm, bits=8)[0], gq, "hpZ q jit vs eager")


def expect_error(kind, text, fn):
    try:
        fn()
    except kind as err:
        assert text in str(err), (text, str(err))
        return
    raise AssertionError(f"no {kind.__name__} for {text!r}")


def check_bad_input():
    x = data(RANK, N, jnp.float32)
    expect_error(TypeError, "dtype int32", lambda: jax.jit(
        lambda v: zj.quantized_all_gather(v, comm))(jnp.arange(8, dtype=jnp.int32)))
    expect_error(ValueError, "multiple of 4", lambda: jax.jit(
        lambda v: zj.reduce_scatter(v, comm))(jnp.ones(6)))
    expect_error(ValueError, "multiple of 2", lambda: zj.all_gather_from_secondary(
        jnp.ones(3), comm))
    expect_error(ValueError, "op must be one of sum, avg", lambda: zj.quantized_reduce_scatter(
        jnp.ones(8), comm, "max"))
    expect_error(ValueError, "bits must be an int", lambda: zj.quantized_all_gather(
        x, comm, bits=-1))
    # The handler's own check: an output of the wrong size never reaches zcoll.
    bad = jax.jit(lambda v: _primitives.bind("all_gather", [v], [((5,), np.dtype("float32"))],
                                             comm=comm.handle)[0])
    expect_error(Exception, "zcollAllGather: the output has 5 elements, expected " +
                 str(N * SIZE), lambda: bad(x).block_until_ready())
    # zcoll's own refusal (4-bit blocks of 100 elements) comes back with its last-error text.
    expect_error(Exception, "zcollQuantizedAllGather failed", lambda: jax.jit(
        lambda v: zj.quantized_all_gather(v, comm, block_size=100))(x).block_until_ready())
    # Still usable, in and outside jit.
    full = jnp.concatenate([data(r, N, jnp.float32) for r in range(SIZE)])
    same_bits(jax.jit(lambda v: zj.all_gather(v, comm))(x), full, "after errors (jit)")
    same_bits(zj.all_gather(x, comm), full, "after errors (eager)")


check_jit_equals_eager_and_core()
check_standard_and_hpz()
check_bad_input()
comm.destroy()
expect_error(ValueError, "destroyed", lambda: zj.all_gather(jnp.ones(4), comm))
print(f"rank {RANK}: zcoll.jax checks passed")
