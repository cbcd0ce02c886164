"""A two-layer MLP with a pre-layer-norm and a residual: y = x + W2 gelu(W1 layernorm(x) + b1) + b2.

`ksmith extract examples/programs/mlp_layernorm.py:mlp_block` finds its parts.
"""

import jax
import jax.numpy as jnp
import numpy as np


def layernorm(x, gamma, beta, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * gamma + beta


@jax.jit
def mlp_block(x, gamma, beta, w1, b1, w2, b2):
    h = layernorm(x, gamma, beta)
    h = jax.nn.gelu(h @ w1 + b1, approximate=True)
    return x + h @ w2 + b2


def mlp_block_example():
    """The sample inputs: 512 tokens of width 256, hidden width 1024."""
    rng = np.random.default_rng(0)
    t, d, f = 512, 256, 1024
    x = rng.standard_normal((t, d)).astype(np.float32)
    gamma = np.ones(d, np.float32)
    beta = np.zeros(d, np.float32)
    w1 = (rng.standard_normal((d, f)) / np.sqrt(d)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(f)).astype(np.float32)
    w2 = (rng.standard_normal((f, d)) / np.sqrt(f)).astype(np.float32)
    b2 = (0.1 * rng.standard_normal(d)).astype(np.float32)
    return tuple(jnp.asarray(a) for a in (x, gamma, beta, w1, b1, w2, b2))
