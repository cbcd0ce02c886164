import math

import jax
import jax.numpy as jnp
import numpy as np


def make_block_mask(rng, shape, dtype, axes):
    """Per-head random block masks [H, NB, NB] of 0/1.  Each head draws its own
    density in [0.2, 0.8]; every query block keeps its diagonal block, so no row is
    empty.  Rows therefore have different numbers (and positions) of key blocks."""
    H, NB, _ = shape
    out = np.zeros(shape, dtype=np.int64)
    for h in range(H):
        density = rng.uniform(0.2, 0.8)
        m = (rng.random((NB, NB)) < density).astype(np.int64)
        np.fill_diagonal(m, 1)
        out[h] = m
    return out.astype(dtype)


def reference(q, k, v, block_mask):
    S, D = q.shape[2], q.shape[3]
    NB = block_mask.shape[1]
    assert S % NB == 0
    BS = S // NB
    allowed = jnp.repeat(jnp.repeat(block_mask != 0, BS, axis=1), BS, axis=2)  # [H, S, S]
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(D))
    s = jnp.where(allowed[None], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)
