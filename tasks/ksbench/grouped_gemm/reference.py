import jax
import jax.numpy as jnp
import numpy as np


def reference(lhs, rhs, group_sizes):
    return jax.lax.ragged_dot(lhs, rhs, group_sizes)


def ragged_group_sizes(rng, shape, dtype, axes):
    """Ragged group sizes summing to M: heavy-tailed (Dirichlet with small alpha),
    so a few groups are large, several tiny, and at least one is empty."""
    (g,) = shape
    m = axes["M"]
    w = rng.dirichlet(np.full(g, 0.6))
    empty = rng.integers(0, g)
    w[empty] = 0.0
    w = w / w.sum()
    sizes = np.floor(w * m).astype(np.int64)
    rest = m - sizes.sum()
    # hand the rounding remainder to the largest group (keeps the empty one empty)
    sizes[np.argmax(sizes)] += rest
    assert sizes.sum() == m and sizes.min() >= 0
    return sizes.astype(dtype)
