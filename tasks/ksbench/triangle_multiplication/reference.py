import jax
import jax.numpy as jnp


def reference(z, wa, wag, wb, wbg, wo, wog):
    a = jax.nn.sigmoid(z @ wag) * (z @ wa)  # [N,N,Ch]
    b = jax.nn.sigmoid(z @ wbg) * (z @ wb)
    t = jnp.einsum("ikc,jkc->ijc", a, b)
    mu = jnp.mean(t, axis=-1, keepdims=True)
    var = jnp.mean((t - mu) ** 2, axis=-1, keepdims=True)
    tn = (t - mu) / jnp.sqrt(var + 1e-5)
    return jax.nn.sigmoid(z @ wog) * (tn @ wo)
