import jax
import jax.numpy as jnp


def reference(x, w, b, bias2):
    h = jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST) + b
    return jnp.maximum(h + bias2, 0)
