"""A small pre-norm transformer block: causal multi-head self-attention and an MLP, each with a
residual. `ksmith extract examples/programs/transformer_block.py:block` finds its parts.
"""

import jax
import jax.numpy as jnp
import numpy as np

HEADS = 4


def layernorm(x, g, b, eps=1e-5):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.var(x, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + eps) * g + b


def attention(x, wqkv, wo):
    s, d = x.shape
    qkv = x @ wqkv
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q, k, v = (t.reshape(s, HEADS, d // HEADS).transpose(1, 0, 2) for t in (q, k, v))
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / jnp.sqrt(d // HEADS).astype(x.dtype)
    causal = jnp.tril(jnp.ones((s, s), bool))
    scores = jnp.where(causal, scores, -1e9)
    p = jax.nn.softmax(scores, axis=-1)
    o = jnp.einsum("hqk,hkd->hqd", p, v).transpose(1, 0, 2).reshape(s, d)
    return o @ wo


@jax.jit
def block(x, g1, b1, wqkv, wo, g2, b2, w1, w2):
    x = x + attention(layernorm(x, g1, b1), wqkv, wo)
    return x + jax.nn.gelu(layernorm(x, g2, b2) @ w1) @ w2


def example_inputs():
    """The sample inputs: a sequence of 256 tokens of width 256."""
    rng = np.random.default_rng(0)
    s, d, f = 256, 256, 512

    def w(*shape):
        return jnp.asarray(rng.standard_normal(shape) / np.sqrt(shape[0]), jnp.float32)

    ones, zeros = jnp.ones(d, jnp.float32), jnp.zeros(d, jnp.float32)
    x = jnp.asarray(rng.standard_normal((s, d)), jnp.float32)
    return (x, ones, zeros, w(d, 3 * d), w(d, d), ones, zeros, w(d, f), w(f, d))
