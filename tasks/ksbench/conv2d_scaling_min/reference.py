import jax
import jax.numpy as jnp


def reference(x, w, cb, scale):
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
        precision=jax.lax.Precision.HIGHEST)
    y = (y + cb[None, :, None, None]) * scale
    return jnp.min(y, axis=1, keepdims=True)
