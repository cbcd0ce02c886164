import jax
import jax.numpy as jnp


def reference(x, w, b, running_mean, running_var, gamma, beta, bias2, div):
    h = jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST) + b
    h = (h - running_mean) / jnp.sqrt(running_var + 1e-5) * gamma + beta
    h = (h + bias2) / div
    return h * jax.nn.sigmoid(h)
