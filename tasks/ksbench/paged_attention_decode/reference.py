import math

import jax
import jax.numpy as jnp
import numpy as np


def make_block_table(rng, shape, dtype, axes):
    """[B, MAX_BLOCKS]: distinct physical block ids, a random permutation of the pool
    (so blocks of one sequence are scattered, never contiguous by construction)."""
    B, MB = shape
    nb = axes["NUM_BLOCKS"]
    assert nb >= B * MB
    return rng.permutation(nb)[: B * MB].reshape(B, MB).astype(dtype)


def make_seq_lens(rng, shape, dtype, axes):
    """[B] ragged lengths in [1, MAX_BLOCKS * BLOCK_SIZE]: uniform, plus one full-length
    sequence, one shorter than a block and one ending mid-block."""
    (B,) = shape
    maxlen = axes["MAX_BLOCKS"] * axes["BLOCK_SIZE"]
    lens = rng.integers(1, maxlen + 1, size=B)
    idx = rng.permutation(B)
    lens[idx[0]] = maxlen
    if B > 1:
        lens[idx[1]] = rng.integers(1, axes["BLOCK_SIZE"])
    if B > 2:
        lens[idx[2]] = axes["BLOCK_SIZE"] * rng.integers(1, axes["MAX_BLOCKS"]) + 7
    return lens.astype(dtype)


def reference(q, k_cache, v_cache, block_table, seq_lens):
    B, H, D = q.shape
    BS = k_cache.shape[1]
    MB = block_table.shape[1]
    T = MB * BS
    k = k_cache[block_table].reshape(B, T, H, D)  # [B, T, H, D]
    v = v_cache[block_table].reshape(B, T, H, D)
    s = jnp.einsum("bhd,bthd->bht", q, k) * (1.0 / math.sqrt(D))
    valid = jnp.arange(T)[None, :] < seq_lens[:, None]  # [B, T]
    s = jnp.where(valid[:, None, :], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bht,bthd->bhd", p, v)
