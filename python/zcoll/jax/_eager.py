"""The eager path: a zcoll.jax call on concrete CPU arrays, outside any trace, goes straight to
zcoll.core: the inputs are read over DLPack, the outputs are zcoll.core.empty arrays
(registered host memory) handed to JAX over DLPack without a copy. No XLA computation is
compiled for it. Before it runs, jax.effects_barrier() waits for every dispatched computation
with an ordered effect, so an eager call cannot overtake an earlier jitted zcoll call."""
import jax
import jax.dlpack

from .. import core


def applies(operands):
    """True for concrete arrays (no tracer) that all live on the CPU."""
    for x in operands:
        if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
            return False
        if any(d.platform != "cpu" for d in x.devices()):
            return False
    return True


def run(out_avals, call):
    """Allocates the outputs, runs call(*outputs) (a zcoll.core method), returns them as JAX
    arrays."""
    jax.effects_barrier()
    outs = [core.empty(shape, dtype.name) for shape, dtype in out_avals]
    call(*outs)
    return [jax.dlpack.from_dlpack(out) for out in outs]
