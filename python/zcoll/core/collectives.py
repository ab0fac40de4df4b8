"""The collectives as Communicator methods, named after the C calls in snake_case, send buffer
first and receive buffer second (zcollAllGather -> ``all_gather(x, out)``); settings are
keyword arguments. Each checks its arrays here (same data type, same memory kind, sizes that
fit), so a bad argument raises before anything is sent and writes nothing."""
import ctypes

from . import _library, arrays, dtypes
from .config import quant_struct
from .errors import ArgumentError

_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
_QUANT_ARGS = ("bits", "intra_bits", "block_size", "symmetric", "stochastic", "seed",
               "pipeline_depth")


def _op(op):
    if isinstance(op, str) and op.lower() in _OPS:
        return _OPS[op.lower()]
    if isinstance(op, int) and not isinstance(op, bool) and op in _OPS.values():
        return op
    raise ArgumentError(f"zcoll.core: op must be one of {', '.join(_OPS)}, got {op!r}")


def _quant(kwargs):
    unknown = set(kwargs) - set(_QUANT_ARGS)
    if unknown:
        raise TypeError(f"zcoll.core: unexpected keyword argument(s) {', '.join(sorted(unknown))}"
                        f" (quantization settings: {', '.join(_QUANT_ARGS)})")
    return ctypes.byref(quant_struct(**kwargs))


class Acquired:
    """The views of one call: taken in order, all released if a later one fails."""

    def __init__(self, stream):
        self.handle = arrays.stream_handle(stream)
        self.views = []

    def __call__(self, obj, what, writable, optional=False):
        if obj is None and optional:
            return None
        v = arrays.view(obj, what, writable=writable, stream=self.handle)
        self.views.append(v)
        return v

    def stream(self):
        """The stream for the C call: NULL for host arrays, the given one for CUDA arrays."""
        kinds = {v.kind for v in self.views}
        if len(kinds) > 1:
            raise ArgumentError("zcoll.core: a call takes host arrays or CUDA arrays, not both")
        if kinds == {arrays.DEVICE}:
            return self.handle
        if self.handle:
            raise ArgumentError("zcoll.core: stream= is for CUDA arrays; these are host arrays")
        return None

    def dtype(self):
        codes = {v.dtype for v in self.views}
        if len(codes) > 1:
            names = ", ".join(sorted(dtypes.NAMES[c] for c in codes))
            raise ArgumentError(f"zcoll.core: the arrays of one call must share a data type "
                                f"(got {names})")
        return codes.pop() if codes else dtypes.UINT8

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            for v in self.views:
                v.release()
        return False


def _expect(view, what, count):
    if view is not None and view.count != count:
        raise ArgumentError(f"zcoll.core: {what} has {view.count} elements; this call needs "
                            f"{count}")


def _address(view):
    return view.address if view is not None else None


class Collectives:
    """Mixed into Communicator: needs self.handle, self.size, self.rank, self._call."""

    def _run(self, take, name, *arguments):
        stream = take.stream()
        self._call(name, getattr(_library.lib, name), arguments + (self.handle, stream),
                   take.views)

    def _divide(self, view, what):
        if view.count % self.size:
            raise ArgumentError(f"zcoll.core: {what} has {view.count} elements, not a multiple "
                                f"of the {self.size} ranks")
        return view.count // self.size

    # ---- standard collectives ---------------------------------------------------------------

    def all_gather(self, x, out, *, stream=None):
        """out[r*n:(r+1)*n] = rank r's x (n elements)."""
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            _expect(recv, "out", send.count * self.size)
            self._run(take, "zcollAllGather", send.address, recv.address, send.count,
                      take.dtype())

    def reduce_scatter(self, x, out, op="sum", *, stream=None):
        """out = op over ranks of x[rank*n:(rank+1)*n] (n = out's elements)."""
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            _expect(send, "x", recv.count * self.size)
            self._run(take, "zcollReduceScatter", send.address, recv.address, recv.count,
                      take.dtype(), _op(op))

    def all_reduce(self, x, out, op="sum", *, stream=None):
        """out = op over ranks of x."""
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            _expect(recv, "out", send.count)
            self._run(take, "zcollAllReduce", send.address, recv.address, send.count,
                      take.dtype(), _op(op))

    def all_to_all(self, x, out, *, stream=None):
        """out[p*n:(p+1)*n] on rank r = x[r*n:(r+1)*n] of rank p."""
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            _expect(recv, "out", send.count)
            self._run(take, "zcollAllToAll", send.address, recv.address,
                      self._divide(send, "x"), take.dtype())

    def broadcast(self, x, out, root=0, *, stream=None):
        """out on every rank = x of `root` (x may be None elsewhere)."""
        with Acquired(stream) as take:
            send = take(x, "x", False, optional=self.rank != root)
            recv = take(out, "out", True)
            _expect(send, "x", recv.count)
            self._run(take, "zcollBroadcast", _address(send), recv.address, recv.count,
                      take.dtype(), root)

    def reduce(self, x, out, root=0, op="sum", *, stream=None):
        """out on `root` = op over ranks of x (out may be None elsewhere)."""
        with Acquired(stream) as take:
            send = take(x, "x", False)
            recv = take(out, "out", True, optional=self.rank != root)
            _expect(recv, "out", send.count)
            self._run(take, "zcollReduce", send.address, _address(recv), send.count,
                      take.dtype(), _op(op), root)

    def gather(self, x, out, root=0, *, stream=None):
        """out[r*n:(r+1)*n] on `root` = rank r's x (out may be None elsewhere)."""
        with Acquired(stream) as take:
            send = take(x, "x", False)
            recv = take(out, "out", True, optional=self.rank != root)
            _expect(recv, "out", send.count * self.size)
            self._run(take, "zcollGather", send.address, _address(recv), send.count,
                      take.dtype(), root)

    def scatter(self, x, out, root=0, *, stream=None):
        """out on rank r = x[r*n:(r+1)*n] of `root` (x may be None elsewhere)."""
        with Acquired(stream) as take:
            send = take(x, "x", False, optional=self.rank != root)
            recv = take(out, "out", True)
            _expect(send, "x", recv.count * self.size)
            self._run(take, "zcollScatter", _address(send), recv.address, recv.count,
                      take.dtype(), root)

    def send(self, x, peer, *, stream=None):
        """Sends x to `peer` (matched in order by its recv of the same size and type)."""
        with Acquired(stream) as take:
            send = take(x, "x", False)
            self._run(take, "zcollSend", send.address, send.count, take.dtype(), peer)

    def recv(self, out, peer, *, stream=None):
        """Receives into out from `peer`."""
        with Acquired(stream) as take:
            recv = take(out, "out", True)
            self._run(take, "zcollRecv", recv.address, recv.count, take.dtype(), peer)

    def barrier(self):
        """Returns once every rank has entered it."""
        self._call("zcollBarrier", _library.lib.zcollBarrier, (self.handle, None), [])

    # ---- ZeRO++ -----------------------------------------------------------------------------

    def quantized_all_gather(self, x, out, *, stream=None, **quant):
        """qwZ: all_gather where every shard travels block-quantized; every rank ends with the
        same bits (the own shard dequant(quant(x)) too). float32, float16, bfloat16. Settings:
        bits (8 or 4; default 8), block_size (default 256), symmetric, stochastic, seed."""
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            _expect(recv, "out", send.count * self.size)
            self._run(take, "zcollQuantizedAllGather", send.address, recv.address, send.count,
                      take.dtype(), _quant(quant))

    def secondary_shard_count(self, count):
        """Elements of hpZ's secondary shard for a shard of `count` elements (nodes * count)."""
        result = ctypes.c_size_t()
        _library.check(_library.lib.zcollSecondaryShardCount(self.handle, count,
                                                             ctypes.byref(result)),
                       self.handle, "zcollSecondaryShardCount")
        return result.value

    def all_gather_hier(self, x, out, secondary=None, *, quantized=True, stream=None, **quant):
        """hpZ forward: inter-node all-gather (quantized as qwZ unless quantized=False) kept in
        `secondary` (secondary_shard_count(n) elements, or None), then an intra-node all-gather
        into out."""
        if quant and not quantized:
            raise ArgumentError("zcoll.core.all_gather_hier: quantization settings given with "
                                "quantized=False")
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            second = take(secondary, "secondary", True, optional=True)
            _expect(recv, "out", send.count * self.size)
            _expect(second, "secondary", self.secondary_shard_count(send.count))
            self._run(take, "zcollAllGatherHier", send.address, recv.address, _address(second),
                      send.count, take.dtype(), _quant(quant) if quantized else None)

    def all_gather_from_secondary(self, secondary, out, *, stream=None):
        """hpZ backward: the intra-node stage from a secondary filled by all_gather_hier (no
        inter-node bytes; out bit-identical to the forward call's)."""
        with Acquired(stream) as take:
            second, recv = take(secondary, "secondary", False), take(out, "out", True)
            if recv.count % self.size:
                raise ArgumentError(f"zcoll.core: out has {recv.count} elements, not a multiple "
                                    f"of the {self.size} ranks")
            count = recv.count // self.size
            _expect(second, "secondary", self.secondary_shard_count(count))
            self._run(take, "zcollAllGatherFromSecondary", second.address, recv.address, count,
                      take.dtype())

    def quantized_reduce_scatter(self, x, out, op="sum", *, stream=None, **quant):
        """qgZ: reduce_scatter (sum or avg) with block-quantized traffic in two hops. Settings:
        bits (inter-node; default 4), intra_bits (default 4), block_size, symmetric,
        stochastic, seed, pipeline_depth."""
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            _expect(send, "x", recv.count * self.size)
            self._run(take, "zcollQuantizedReduceScatter", send.address, recv.address,
                      recv.count, take.dtype(), _op(op), _quant(quant))

    def quantized_all_reduce(self, x, out, op="sum", *, residual=None, stream=None, **quant):
        """all_reduce (sum or avg) through qgZ then qwZ; every rank ends with the same bits.
        residual: an error-feedback buffer of quantized_all_reduce_residual_size(...) bytes,
        zeroed before the first call (zcollQuantizedAllReduceWithResidual)."""
        with Acquired(stream) as take:
            send, recv = take(x, "x", False), take(out, "out", True)
            _expect(recv, "out", send.count)
            dtype, config = take.dtype(), _quant(quant)
            if residual is None:
                self._run(take, "zcollQuantizedAllReduce", send.address, recv.address,
                          send.count, dtype, _op(op), config)
                return
            state = arrays.view(residual, "residual", writable=True, stream=take.handle)
            take.views.append(state)
            nbytes = state.count * dtypes.ITEMSIZE[state.dtype]
            self._run(take, "zcollQuantizedAllReduceWithResidual", send.address, recv.address,
                      send.count, dtype, _op(op), config, state.address, nbytes)

    def quantized_all_reduce_residual_size(self, count, dtype, **quant):
        """Bytes of quantized_all_reduce's residual buffer for `count` elements of `dtype`."""
        result = ctypes.c_size_t()
        _library.check(_library.lib.zcollQuantizedAllReduceResidualSize(
            count, dtypes.parse(dtype), _quant(quant), self.handle, ctypes.byref(result)),
            self.handle, "zcollQuantizedAllReduceResidualSize")
        return result.value
