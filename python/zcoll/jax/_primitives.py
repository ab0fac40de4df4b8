"""zcoll's collectives as JAX primitives that lower to the XLA FFI targets of _targets.py.

Ordering. jax.ffi.ffi_call (jax 0.10) offers has_side_effect but no ordered effect, and two
side-effecting custom calls with no data dependency may run in either order (XLA's CPU runtime
runs independent operations concurrently). So each collective is a primitive of its own whose
abstract evaluation declares ZcollEffect, an *ordered* effect (registered like
jax.experimental.io_callback's OrderedIOEffect). For an ordered effect JAX threads a token
through the lowering: every zcoll custom call takes the token produced by the previous one and
produces the next, so within a computation the calls run in program order; and across
computations JAX keeps a runtime token per device that makes each dispatch wait for the
previous effectful one. Every rank traces the same program, so every rank issues the same
collectives in the same order, as zcoll requires (zcoll.h: "Every rank must make the same
collective calls in the same order"). The FFI handlers take the token as their first operand
and return it as their first result (csrc/README.md).
"""
from jax._src import effects
from jax._src.interpreters import mlir
from jax.extend.core import Primitive
from jax.core import ShapedArray

from ._targets import target_name


class ZcollEffect(effects.Effect):
    """The ordered effect of every zcoll.jax collective."""

    def __str__(self):
        return "ZcollOrdered"


EFFECT = ZcollEffect()
effects.ordered_effects.add_type(ZcollEffect)
effects.lowerable_effects.add_type(ZcollEffect)
effects.control_flow_allowed_effects.add_type(ZcollEffect)  # inside lax.scan / cond / while
effects.remat_allowed_effects.add_type(ZcollEffect)
effects.custom_derivatives_allowed_effects.add_type(ZcollEffect)


def _attribute(value):
    """An FFI attribute of a primitive parameter: ints as i64, dicts of ints as dictionaries."""
    if isinstance(value, dict):
        from jax._src.lib.mlir import ir
        return ir.DictAttr.get({k: _attribute(v) for k, v in value.items()})
    return mlir.i64_attr(int(value))


def _lowering(name):
    target = target_name(name)

    def lower(ctx, *operands, out_avals, **attributes):
        token = ctx.tokens_in.get(EFFECT)
        result_types = [mlir.token_type()] + [mlir.aval_to_ir_type(ctx.module_context, a)
                                              for a in ctx.avals_out]
        call = mlir.custom_call(
            target, result_types=result_types, operands=[token, *operands],
            backend_config={k: _attribute(v) for k, v in attributes.items()},
            has_side_effect=True, api_version=4)
        token_out, *results = call.results
        ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({EFFECT: token_out})))
        return results

    return lower


def _abstract_eval(*avals, out_avals, **attributes):
    del avals, attributes
    outs = [ShapedArray(shape, dtype) for shape, dtype in out_avals]
    return outs, {EFFECT}


def _make(name):
    """The primitive of one collective. Its parameters: out_avals (((shape), dtype), ...) and
    the FFI attributes (comm, op, root, quant, ...), all hashable, so jit caches by them."""
    primitive = Primitive(f"zcoll_{name}")
    primitive.multiple_results = True
    primitive.def_impl(lambda *args, **params: _apply(primitive, *args, **params))
    primitive.def_effectful_abstract_eval(_abstract_eval)
    mlir.register_lowering(primitive, _lowering(name))
    return primitive


def _apply(primitive, *args, **params):
    # Outside jit, a bound primitive runs as a one-operation computation (jax's default).
    from jax._src import dispatch
    return dispatch.apply_primitive(primitive, *args, **params)


PRIMITIVES = {}


def bind(name, operands, out_avals, **attributes):
    """Binds collective `name` on `operands`; out_avals: ((shape, dtype), ...). Returns the
    list of results. Dict attributes are passed as tuples of items (hashable)."""
    primitive = PRIMITIVES.get(name)
    if primitive is None:
        primitive = PRIMITIVES[name] = _make(name)
    frozen = {k: (_Frozen(v) if isinstance(v, dict) else v) for k, v in attributes.items()}
    return primitive.bind(*operands, out_avals=tuple(out_avals), **frozen)


class _Frozen(dict):
    """A dict parameter that jit can hash (the quantization settings)."""

    def __hash__(self):
        return hash(tuple(sorted(self.items())))
