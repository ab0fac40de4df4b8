"""zcoll.jax: zcoll's collectives, qwZ / hpZ / qgZ included, for JAX arrays, inside and outside
``jax.jit``.

Inside jit (and under lax.scan / cond / while) each call is an XLA FFI custom call into
libzcoll_jax.so (csrc/), on the CPU (host buffers, the call blocks) and, where JAX has a CUDA
backend, on XLA's CUDA stream; the calls carry an ordered effect, so they run in program order
on every rank (_primitives.py says why that is sufficient). Outside jit, on concrete CPU
arrays, a call goes to zcoll.core over DLPack (_eager.py). Both give the same bits.

``comm`` is a zcoll.core.Communicator (``Communicator.from_env()`` under tools/zcollrun). Arrays
are split and gathered along their leading dimension (a scalar gathers into a vector). Results
are new arrays; the quantization settings are zcoll.core's keywords (bits, intra_bits,
block_size, symmetric, stochastic, seed, pipeline_depth; None = zcoll's default).

    import jax, jax.numpy as jnp, zcoll.core, zcoll.jax as zj
    comm = zcoll.core.Communicator.from_env()
    gather = jax.jit(lambda shard: zj.quantized_all_gather(shard, comm, bits=8))
    full = gather(jnp.ones((256,), jnp.bfloat16))     # (256 * comm.size,)

Not supported: jax.vmap and differentiation through the collectives (no batching, JVP or
transpose rules), jit over several devices of one process (one device per rank).
"""
import jax.numpy as jnp
import numpy as np

from . import _args, _eager, _primitives
from ._targets import library_path

__all__ = ["all_gather", "all_gather_from_secondary", "all_gather_hier", "all_reduce",
           "all_to_all", "broadcast", "library_path", "quantized_all_gather",
           "quantized_all_reduce", "quantized_reduce_scatter", "reduce_scatter"]


def _as_array(x):
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else jnp.asarray(x)


def _run(name, comm, operands, out_avals, eager, **attributes):
    """Runs collective `name`: eagerly through zcoll.core (eager(*outs) makes the call) or as
    the primitive. Returns the list of results."""
    handle = comm.handle  # raises for a destroyed communicator
    out_avals = [(tuple(int(d) for d in shape), np.dtype(dtype)) for shape, dtype in out_avals]
    if _eager.applies(operands):
        return _eager.run(out_avals, eager)
    return _primitives.bind(name, operands, out_avals, comm=handle, **attributes)


# ---- standard collectives --------------------------------------------------------------------

def all_gather(x, comm):
    """The ranks' x concatenated along the leading dimension in rank order (zcollAllGather)."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "all_gather")
    out = (_args.gathered(x.shape, comm.size), dtype)
    return _run("all_gather", comm, [x], [out], lambda o: comm.all_gather(x, o))[0]


def reduce_scatter(x, comm, op="sum"):
    """op over the ranks of this rank's block of x (the leading dimension split into size
    blocks; zcollReduceScatter)."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "reduce_scatter")
    code = _args.op_code(op, "reduce_scatter")
    out = (_args.leading_blocks(x.shape, comm.size, "reduce_scatter"), dtype)
    return _run("reduce_scatter", comm, [x], [out],
                lambda o: comm.reduce_scatter(x, o, op=code), op=code)[0]


def all_reduce(x, comm, op="sum"):
    """op over the ranks of x, elementwise (zcollAllReduce)."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "all_reduce")
    code = _args.op_code(op, "all_reduce")
    return _run("all_reduce", comm, [x], [(x.shape, dtype)],
                lambda o: comm.all_reduce(x, o, op=code), op=code)[0]


def all_to_all(x, comm):
    """Block p of the result on rank r = block r of x on rank p, blocks along the leading
    dimension (zcollAllToAll)."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "all_to_all")
    _args.leading_blocks(x.shape, comm.size, "all_to_all")
    return _run("all_to_all", comm, [x], [(x.shape, dtype)],
                lambda o: comm.all_to_all(x, o))[0]


def broadcast(x, comm, root=0):
    """x of rank `root` on every rank (zcollBroadcast)."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "broadcast")
    root = _args.root_of(root, comm.size, "broadcast")
    return _run("broadcast", comm, [x], [(x.shape, dtype)],
                lambda o: comm.broadcast(x, o, root=root), root=root)[0]


# ---- ZeRO++ ------------------------------------------------------------------------------------

def _given(quant):
    """The quantization keywords actually given (for zcoll.core, whose defaults are zcoll's)."""
    return {k: v for k, v in quant.items() if v is not None}


def quantized_all_gather(x, comm, *, bits=8, block_size=None, symmetric=True, stochastic=False,
                         seed=0):
    """qwZ: all_gather where every shard travels block-quantized (bits 8 or 4); every rank,
    the shard's owner included, gets dequant(quant(shard)), so all ranks hold the same bits
    (zcollQuantizedAllGather). float32, float16, bfloat16."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "quantized_all_gather", _args.QUANTIZED_DTYPES)
    given = _given(dict(bits=bits, block_size=block_size, symmetric=symmetric,
                        stochastic=stochastic, seed=seed))
    quant = _args.quant_attribute(**given)
    out = (_args.gathered(x.shape, comm.size), dtype)
    return _run("quantized_all_gather", comm, [x], [out],
                lambda o: comm.quantized_all_gather(x, o, **given), quant=quant)[0]


def all_gather_hier(x, comm, *, quantized=True, bits=None, block_size=None, symmetric=True,
                    stochastic=False, seed=0):
    """hpZ forward: returns (full, secondary). An inter-node all-gather among the ranks of this
    rank's local index (quantized as qwZ unless quantized=False) whose result is `secondary`
    (nodes * x's leading dimension rows), then an intra-node all-gather of the secondary
    shards into `full` (as all_gather's). Keep `secondary` for all_gather_from_secondary
    (zcollAllGatherHier). Quantized: float32, float16, bfloat16; exact: any type. Needs the
    same number of ranks on every node."""
    x = _as_array(x)
    allowed = _args.QUANTIZED_DTYPES if quantized else _args.DTYPES
    dtype = _args.dtype_of(x, "all_gather_hier", allowed)
    given = _given(dict(bits=bits, block_size=block_size, symmetric=symmetric,
                        stochastic=stochastic, seed=seed))
    if not quantized and (bits is not None or block_size is not None or not symmetric or
                          stochastic or seed):
        raise _args.ArgumentError("zcoll.jax.all_gather_hier: quantization settings given "
                                  "with quantized=False")
    quant = _args.quant_attribute(**given)
    full = (_args.gathered(x.shape, comm.size), dtype)
    secondary = (_args.gathered(x.shape, comm.node_count), dtype)
    core_quant = given if quantized else {}
    return tuple(_run("all_gather_hier", comm, [x], [full, secondary],
                      lambda o, s: comm.all_gather_hier(x, o, s, quantized=quantized,
                                                        **core_quant),
                      quantized=int(bool(quantized)), quant=quant))


def all_gather_from_secondary(secondary, comm):
    """hpZ backward: all_gather_hier's `full` again from its `secondary`, with no inter-node
    traffic; bit-identical to the forward's (zcollAllGatherFromSecondary)."""
    secondary = _as_array(secondary)
    dtype = _args.dtype_of(secondary, "all_gather_from_secondary")
    shard = _args.leading_blocks(secondary.shape, comm.node_count, "all_gather_from_secondary",
                                 "secondary")
    out = (_args.gathered(shard, comm.size), dtype)
    return _run("all_gather_from_secondary", comm, [secondary], [out],
                lambda o: comm.all_gather_from_secondary(secondary, o))[0]


def quantized_reduce_scatter(x, comm, op="sum", *, bits=None, intra_bits=None, block_size=None,
                             symmetric=True, stochastic=False, seed=0, pipeline_depth=None):
    """qgZ: reduce_scatter (op sum or avg) whose traffic is block-quantized in two hops
    (intra-node at intra_bits, inter-node at bits; default 4 and 4) with fp32 sums
    (zcollQuantizedReduceScatter). float32, float16, bfloat16."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "quantized_reduce_scatter", _args.QUANTIZED_DTYPES)
    code = _args.op_code(op, "quantized_reduce_scatter", _args.QUANTIZED_OPS)
    given = _given(dict(bits=bits, intra_bits=intra_bits, block_size=block_size,
                        symmetric=symmetric, stochastic=stochastic, seed=seed,
                        pipeline_depth=pipeline_depth))
    quant = _args.quant_attribute(**given)
    out = (_args.leading_blocks(x.shape, comm.size, "quantized_reduce_scatter"), dtype)
    return _run("quantized_reduce_scatter", comm, [x], [out],
                lambda o: comm.quantized_reduce_scatter(x, o, op=code, **given),
                op=code, quant=quant)[0]


def quantized_all_reduce(x, comm, op="sum", *, bits=None, intra_bits=None, block_size=None,
                         symmetric=True, stochastic=False, seed=0, pipeline_depth=None):
    """all_reduce (op sum or avg) through qgZ then qwZ; every rank ends with the same bits;
    below 256 KiB per rank it is zcollAllReduce (zcollQuantizedAllReduce). float32, float16,
    bfloat16."""
    x = _as_array(x)
    dtype = _args.dtype_of(x, "quantized_all_reduce", _args.QUANTIZED_DTYPES)
    code = _args.op_code(op, "quantized_all_reduce", _args.QUANTIZED_OPS)
    given = _given(dict(bits=bits, intra_bits=intra_bits, block_size=block_size,
                        symmetric=symmetric, stochastic=stochastic, seed=seed,
                        pipeline_depth=pipeline_depth))
    quant = _args.quant_attribute(**given)
    return _run("quantized_all_reduce", comm, [x], [(x.shape, dtype)],
                lambda o: comm.quantized_all_reduce(x, o, op=code, **given),
                op=code, quant=quant)[0]
