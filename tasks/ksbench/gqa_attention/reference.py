import math

import jax
import jax.numpy as jnp


def reference(q, k, v):
    B, HQ, S, D = q.shape
    HKV = k.shape[1]
    assert HQ % HKV == 0
    G = HQ // HKV
    # query head h = hkv * G + g reads kv head hkv
    k = jnp.repeat(k, G, axis=1)
    v = jnp.repeat(v, G, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(D))
    mask = jnp.tril(jnp.ones((S, S), dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)
