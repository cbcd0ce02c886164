import jax
import numpy as np


def make_group_sizes(rng, shape, dtype, axes):
    """Skewed MoE-like split of M rows into G groups (some groups may be empty)."""
    (g,) = shape
    m = axes["M"]
    p = rng.dirichlet(np.full(g, 0.7))
    sizes = rng.multinomial(m, p)
    return sizes.astype(dtype)


def reference(lhs, rhs, group_sizes):
    return jax.lax.ragged_dot(lhs, rhs, group_sizes.astype("int32"))
