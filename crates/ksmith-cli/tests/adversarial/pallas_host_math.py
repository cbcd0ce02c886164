# task: vector_add; expect: POLICY_REJECTED forbidden_call
# A Pallas kernel that copies, while the host function does the work with library math.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def vector_add(a, b, N):
    s = jnp.einsum("i,i->i", a, jnp.ones_like(b)) + b
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct((N,), a.dtype))(s)
