import jax
import jax.numpy as jnp


def reference(x, w, cb):
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
        precision=jax.lax.Precision.HIGHEST)
    y = y + cb[None, :, None, None]
    B, C, HO, WO = y.shape
    PH, PW = HO // 2, WO // 2
    p = y[:, :, : 2 * PH, : 2 * PW].reshape(B, C, PH, 2, PW, 2).mean(axis=(3, 5))
    return jnp.sum(jax.nn.sigmoid(p), axis=(1, 2, 3))
