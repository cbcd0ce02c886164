import jax
import jax.numpy as jnp


def reference(x, w, cb, scale, bias):
    c = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"))
    h = jnp.tanh(c + cb[None, :, None, None]) * scale + bias[None, :, None, None]
    return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
