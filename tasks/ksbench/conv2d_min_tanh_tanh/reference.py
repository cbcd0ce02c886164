import jax
import jax.numpy as jnp


def reference(x, w, conv_bias):
    c = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"))
    c = c + conv_bias[None, :, None, None]
    m = jnp.min(c, axis=1, keepdims=True)
    return jnp.tanh(jnp.tanh(m))
