import jax
import jax.numpy as jnp
import numpy as np


def reference(q, k_cache, v_cache, cu_seqlens, block_table):
    n_seq, max_blocks = block_table.shape
    _, block_size, n_heads, head_dim = k_cache.shape
    t_total = q.shape[0]
    L = max_blocks * block_size
    # gather each sequence's keys / values through its block table: [B, L, H, D]
    kseq = k_cache[block_table].reshape(n_seq, L, n_heads, head_dim)
    vseq = v_cache[block_table].reshape(n_seq, L, n_heads, head_dim)
    starts = cu_seqlens[:-1]
    lens = cu_seqlens[1:] - starts
    i = jnp.arange(L)
    qidx = jnp.clip(starts[:, None] + i[None, :], 0, t_total - 1)
    qpad = q[qidx]                                                  # [B, L, H, D]
    s = jnp.einsum("bihd,bjhd->bhij", qpad, kseq) * (head_dim ** -0.5)  # python float: weakly typed
    mask = (i[None, :] <= i[:, None])[None, None] & (i[None, None, None, :] < lens[:, None, None, None])
    s = jnp.where(mask, s, -jnp.inf)
    s = s - jnp.max(s, axis=-1, keepdims=True)
    p = jnp.exp(s)
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    o = jnp.einsum("bhij,bjhd->bihd", p, vseq)                      # [B, L, H, D]
    t = jnp.arange(t_total)
    b = jnp.searchsorted(cu_seqlens, t, side="right") - 1
    return o[b, t - cu_seqlens[b]]


def ragged_cu_seqlens(rng, shape, dtype, axes):
    """Offsets [B+1] of B ragged sequences (lengths 1..MB*BS, summing to T): a mix of
    long prompts and short ones, lengths rarely multiples of the block size."""
    (b1,) = shape
    n = b1 - 1
    T, cap = axes["T"], axes["MB"] * axes["BS"]
    assert n == axes["B"] and n <= T <= n * cap
    w = rng.dirichlet(np.full(n, 0.8))
    lens = np.minimum(1 + np.floor(w * (T - n)).astype(np.int64), cap)
    rest = T - lens.sum()
    while rest > 0:  # hand out the remainder to sequences with room, at random
        room = np.flatnonzero(lens < cap)
        k = rng.choice(room)
        add = min(rest, cap - lens[k], 1 + rest // 2)
        lens[k] += add
        rest -= add
    assert lens.sum() == T and lens.min() >= 1 and lens.max() <= cap
    return np.concatenate([[0], np.cumsum(lens)]).astype(dtype)


def scattered_block_table(rng, shape, dtype, axes):
    """Each sequence's MB blocks are distinct physical blocks drawn at random from the
    NB-block pool (no two sequences share a block, no ordering to exploit)."""
    n, mb = shape
    assert n * mb <= axes["NB"]
    return rng.permutation(axes["NB"])[: n * mb].reshape(n, mb).astype(dtype)
