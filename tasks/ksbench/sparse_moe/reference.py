import jax
import jax.numpy as jnp
import numpy as np

TOP_K = 2  # = the const axis K


def reference(x, w_r, b_r, w1, w2):
    logits = x @ w_r + b_r
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    e = jnp.exp(logits)
    p = e / jnp.sum(e, axis=-1, keepdims=True)
    topv, topi = jax.lax.top_k(p, TOP_K)
    topv = topv / jnp.sum(topv, axis=-1, keepdims=True)
    n_exp = w1.shape[0]
    combine = jnp.sum(jax.nn.one_hot(topi, n_exp, dtype=x.dtype) * topv[..., None], axis=1)  # [T, E]
    h = jnp.einsum("td,edf->tef", x, w1)
    h = h / (1 + jnp.exp(-h))
    o = jnp.einsum("tef,efd->ted", h, w2)
    return jnp.einsum("te,ted->td", combine, o)


def skewed_router_bias(rng, shape, dtype, axes):
    """Router bias that makes the load genuinely imbalanced: one 'hot' expert, a
    spread of the rest, and one nearly starved expert."""
    (n,) = shape
    b = rng.normal(0.0, 1.0, size=n)
    perm = rng.permutation(n)
    b[perm[0]] += 2.0    # hot expert: picked by most tokens
    b[perm[1]] = -6.0    # starved expert: almost never picked
    return b.astype(dtype)
