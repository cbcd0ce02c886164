import jax
import jax.numpy as jnp


def reference(x, w, b, cst, cst2):
    h = jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST) + b
    return jnp.minimum(h, cst) - cst2
