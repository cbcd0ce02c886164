import jax.numpy as jnp


def reference(x, w_gate, w_up, w_down):
    g = x @ w_gate
    u = x @ w_up
    h = g / (1 + jnp.exp(-g)) * u
    return h @ w_down
