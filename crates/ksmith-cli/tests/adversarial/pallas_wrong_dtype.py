# task: vector_add; expect: INCORRECT_DTYPE output_dtype
# Returns float16 where the task declares float32.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = (a_ref[...] + b_ref[...]).astype(jnp.float16)


def vector_add(a, b, N):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((N,), jnp.float16))(a, b)
