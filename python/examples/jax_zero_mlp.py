"""A small JAX MLP trained ZeRO-3 style with zcoll.jax: every rank keeps 1/size of the flat
parameter vector (and of the optimizer state); each step gathers the weights, computes the
gradient on the rank's own batch and reduce-scatters it back to the shards.

Two runs from the same initial weights and data:
  exact:  all_gather for the weights, reduce_scatter (avg) for the gradients;
  zeropp: hpZ + qwZ for the forward weights (all_gather_hier, 8-bit inter-node hop, keeping
          the secondary shard), hpZ's all_gather_from_secondary for the backward pass's
          weights (no inter-node bytes), qgZ (quantized_reduce_scatter, avg, 4-bit both
          hops, or --grad-bits 8) for the gradients.
Each step is one jax.jit computation; the collectives run inside it through XLA FFI.

    tools/zcollrun -n 4 --nodes 2 python3 python/examples/jax_zero_mlp.py [--steps 300]

(with PYTHONPATH=python ZCOLL_LIBRARY=build/libzcoll.so when zcoll is not installed). Prints
the held-out loss of both runs and their relative difference; --check fails (exit 1) when
it exceeds --tolerance (default 1%).
"""
import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np

import zcoll.core
import zcoll.jax as zj

SIZES = (32, 128, 128, 8)  # inputs, two hidden layers, outputs


def init_params(key):
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (fan_in, fan_out)) / np.sqrt(fan_in),
                       jnp.zeros(fan_out)))
    return params


def forward(params, x):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)


def make_data(seed, n):
    """A fixed random teacher network's outputs (plus noise) on random inputs."""
    teacher = init_params(jax.random.PRNGKey(1234))
    x = jax.random.normal(jax.random.PRNGKey(seed), (n, SIZES[0]))
    noise = 0.01 * jax.random.normal(jax.random.PRNGKey(seed + 1), (n, SIZES[-1]))
    return x, forward(teacher, x) + noise


class Flat:
    """The parameter pytree <-> one flat float32 vector padded to a multiple of `size`."""

    def __init__(self, params, size):
        leaves, self.tree = jax.tree_util.tree_flatten(params)
        self.shapes = [leaf.shape for leaf in leaves]
        self.count = sum(int(np.prod(s)) for s in self.shapes)
        self.padded = -(-self.count // size) * size

    def flatten(self, params):
        flat = jnp.concatenate([leaf.ravel() for leaf in jax.tree_util.tree_leaves(params)])
        return jnp.pad(flat, (0, self.padded - self.count))

    def unflatten(self, flat):
        leaves, at = [], 0
        for shape in self.shapes:
            n = int(np.prod(shape))
            leaves.append(flat[at:at + n].reshape(shape))
            at += n
        return jax.tree_util.tree_unflatten(self.tree, leaves)


def make_step(comm, flat, mode, lr, grad_bits):
    def gradient(full_fwd, full_bwd, x, y):
        loss = loss_fn(flat.unflatten(full_fwd), x, y)
        grads = jax.grad(loss_fn)(flat.unflatten(full_bwd), x, y)
        return loss, flat.flatten(grads)

    @jax.jit
    def step(shard, m, v, t, x, y):
        if mode == "exact":
            full = zj.all_gather(shard, comm)
            loss, g = gradient(full, full, x, y)
            g_shard = zj.reduce_scatter(g, comm, "avg")
        else:
            full, secondary = zj.all_gather_hier(shard, comm, bits=8)
            # ZeRO-3 frees gathered weights after the forward and gathers them again for the
            # backward: hpZ gathers them from the secondary shard, within the node.
            full_bwd = zj.all_gather_from_secondary(secondary, comm)
            loss, g = gradient(full, full_bwd, x, y)
            g_shard = zj.quantized_reduce_scatter(g, comm, "avg", bits=grad_bits,
                                                  intra_bits=grad_bits)
        # Adam on the shard.
        m = 0.9 * m + 0.1 * g_shard
        v = 0.999 * v + 0.001 * g_shard * g_shard
        update = (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        return shard - lr * update, m, v, loss

    return step


def train(comm, mode, steps, lr, batch, grad_bits):
    params = init_params(jax.random.PRNGKey(0))
    flat = Flat(params, comm.size)
    rows = flat.padded // comm.size
    shard = flat.flatten(params)[comm.rank * rows:(comm.rank + 1) * rows]
    m = v = jnp.zeros_like(shard)
    x_all, y_all = make_data(100 + comm.rank, steps * batch)  # this rank's data
    step = make_step(comm, flat, mode, lr, grad_bits)
    for t in range(1, steps + 1):
        x, y = x_all[(t - 1) * batch:t * batch], y_all[(t - 1) * batch:t * batch]
        shard, m, v, loss = step(shard, m, v, t, x, y)
        if comm.rank == 0 and (t % max(steps // 5, 1) == 0 or t == 1):
            print(f"{mode:6s} step {t:4d} train loss (rank 0's batch) {float(loss):.5f}")
    full = zj.all_gather(shard, comm)  # the trained weights, exactly
    x_eval, y_eval = make_data(7, 2048)  # the same held-out set on every rank
    return float(loss_fn(flat.unflatten(full), x_eval, y_eval)), flat.count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--grad-bits", type=int, default=4, choices=(4, 8),
                        help="qgZ's bits on both hops (ZeRO++'s default: 4)")
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    comm = zcoll.core.Communicator.from_env()
    exact, count = train(comm, "exact", args.steps, args.lr, args.batch, args.grad_bits)
    zeropp, _ = train(comm, "zeropp", args.steps, args.lr, args.batch, args.grad_bits)
    diff = abs(zeropp - exact) / exact
    if comm.rank == 0:
        print(f"{comm.size} ranks on {comm.node_count} nodes, {count} parameters, "
              f"{args.steps} steps: held-out loss exact {exact:.5f}, zeropp {zeropp:.5f}, "
              f"relative difference {100 * diff:.3f}%")
    comm.destroy()
    if args.check and diff > args.tolerance:
        print(f"relative difference {100 * diff:.3f}% > {100 * args.tolerance}%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
