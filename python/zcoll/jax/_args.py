"""Argument checks of zcoll.jax, made at trace time: a bad call raises here (zcoll.core's
exception types) before anything is lowered or sent, so the communicator stays usable."""
import numpy as np

from ..core.errors import ArgumentError, BufferTypeError

DTYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
          "float32", "float64")
QUANTIZED_DTYPES = ("float32", "float16", "bfloat16")
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
QUANTIZED_OPS = ("sum", "avg")
_INT32_MAX = 2**31 - 1


def dtype_of(x, what, allowed=DTYPES):
    """x's dtype (numpy's), checked to be one the collective takes."""
    dtype = np.dtype(x.dtype)
    if dtype.name not in allowed:
        raise BufferTypeError(f"zcoll.jax.{what}: dtype {dtype.name} is not one it takes "
                              f"({', '.join(allowed)})")
    return dtype


def op_code(op, what, allowed=tuple(OPS)):
    name = op.lower() if isinstance(op, str) else op
    if name not in allowed:
        raise ArgumentError(f"zcoll.jax.{what}: op must be one of {', '.join(allowed)}, "
                            f"got {op!r}")
    return OPS[name]


def leading_blocks(shape, parts, what, name="x"):
    """shape with its leading dimension divided by `parts` (the rank's block), checked."""
    if not shape or shape[0] % parts:
        raise ArgumentError(f"zcoll.jax.{what}: {name} has shape {tuple(shape)}; its leading "
                            f"dimension must be a multiple of {parts}")
    return (shape[0] // parts,) + tuple(shape[1:])


def gathered(shape, parts):
    """shape with its leading dimension multiplied by `parts` ((parts,) for a scalar)."""
    if not shape:
        return (parts,)
    return (shape[0] * parts,) + tuple(shape[1:])


def _setting(name, value, limit=_INT32_MAX):
    if value is None:
        return 0
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or \
            not 0 <= value <= limit:
        raise ArgumentError(f"zcoll.jax: {name} must be an int in [0, {limit}] or None, got "
                            f"{value!r}")
    return int(value)


def quant_attribute(bits=None, intra_bits=None, block_size=None, symmetric=True,
                    stochastic=False, seed=0, pipeline_depth=None):
    """The handlers' `quant` attribute (csrc/ffi_common.h QuantAttrs): 0 = zcoll's default.
    The seed's 64 bits travel as a signed i64."""
    seed = _setting("seed", seed, 2**64 - 1)
    return {"bits": _setting("bits", bits), "intra_bits": _setting("intra_bits", intra_bits),
            "block_size": _setting("block_size", block_size),
            "mode": 0 if symmetric else 1, "rounding": 1 if stochastic else 0,
            "seed": seed - 2**64 if seed >= 2**63 else seed,
            "pipeline_depth": _setting("pipeline_depth", pipeline_depth)}


def root_of(root, size, what):
    if not isinstance(root, (int, np.integer)) or isinstance(root, bool) or \
            not 0 <= root < size:
        raise ArgumentError(f"zcoll.jax.{what}: root must be a rank in [0, {size}), got "
                            f"{root!r}")
    return int(root)
