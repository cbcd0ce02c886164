import jax.numpy as jnp
import numpy as np


def reference(x, w):
    # Statistics and scaling in (at least) float32, one rounding to the input dtype at the
    # end: what LLM stacks do with bfloat16 activations. Under the judge's float64
    # reference, float64 is kept throughout.
    dt = jnp.promote_types(x.dtype, jnp.float32)
    xf = x.astype(dt)
    ms = jnp.mean(xf * xf, axis=-1, keepdims=True)
    return (xf / jnp.sqrt(ms + 1e-6) * w.astype(dt)).astype(x.dtype)


def llm_activations(rng, shape, dtype, axes):
    """Hidden states as seen in LLMs: per-row scales spanning ~3 decades and a few
    'massive activation' channels (fixed across rows) ~20-60x the typical size."""
    m, n = shape
    x = rng.standard_normal((m, n))
    n_out = max(2, n // 512)
    ch = rng.choice(n, size=n_out, replace=False)
    x[:, ch] *= rng.uniform(20.0, 60.0, size=n_out) * rng.choice([-1.0, 1.0], size=n_out)
    row_scale = 10.0 ** rng.uniform(-1.5, 1.5, size=(m, 1))
    return (x * row_scale).astype(dtype)
