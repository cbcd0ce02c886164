import jax
import jax.numpy as jnp
from jax.scipy.special import erf


def reference(x, w, b, scale):
    h = x @ w + b
    B, OUT = h.shape
    P = 4
    p = jnp.mean(h.reshape(B, OUT // P, P), axis=2)
    g = 0.5 * p * (1.0 + erf(p / jnp.sqrt(2.0))) * scale
    return jnp.max(g, axis=1)
