import jax.numpy as jnp


def reference(q, k, v, gamma):
    s = q.shape[2]
    d = q.shape[3]
    idx = jnp.arange(s)
    diff = idx[:, None] - idx[None, :]
    expo = jnp.maximum(diff, 0).astype(q.dtype)
    decay = jnp.where(diff[None] >= 0, gamma[:, None, None] ** expo[None], 0.0)  # [H,S,S]
    scores = jnp.einsum("bhid,bhjd->bhij", q, k) / jnp.sqrt(jnp.asarray(d, dtype=q.dtype))
    return jnp.einsum("bhij,bhjd->bhid", scores * decay[None].astype(q.dtype), v)
