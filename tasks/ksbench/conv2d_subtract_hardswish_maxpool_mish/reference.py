import jax
import jax.numpy as jnp


def reference(x, w, conv_bias, sub):
    c = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"))
    c = c + conv_bias[None, :, None, None] - sub
    c = c * jnp.clip(c + 3.0, 0.0, 6.0) / 6.0
    p = jax.lax.reduce_window(c, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return p * jnp.tanh(jnp.logaddexp(p, 0.0))
