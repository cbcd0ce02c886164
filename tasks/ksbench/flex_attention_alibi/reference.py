import math

import jax
import jax.numpy as jnp
import numpy as np

W = 256  # sliding window; must match the const axis W in task.toml


def make_alibi_slopes(rng, shape, dtype, axes):
    """ALiBi's geometric slopes 2^(-8 (h+1) / H), each jittered by a random factor in
    [0.5, 1.5] and randomly permuted across heads (so no closed form applies)."""
    (H,) = shape
    base = 2.0 ** (-8.0 * np.arange(1, H + 1) / H)
    s = base * rng.uniform(0.5, 1.5, size=H)
    return rng.permutation(s).astype(dtype)


def reference(q, k, v, slopes):
    S, D = q.shape[2], q.shape[3]
    i = jnp.arange(S)[:, None]
    j = jnp.arange(S)[None, :]
    dist = i - j
    allowed = (dist >= 0) & (dist < W)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(D))
    s = s - slopes[None, :, None, None] * dist.astype(q.dtype)[None, None]
    s = jnp.where(allowed[None, None], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)
