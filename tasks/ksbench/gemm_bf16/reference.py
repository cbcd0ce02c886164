import jax.numpy as jnp


def reference(a, b):
    # float32 (or wider) accumulation, one rounding to the input dtype: a bfloat16 GEMM as
    # accelerators run it. Under the judge's float64 reference, float64 is kept throughout.
    dt = jnp.promote_types(a.dtype, jnp.float32)
    return jnp.matmul(a.astype(dt), b.astype(dt)).astype(a.dtype)
