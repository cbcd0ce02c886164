# task: vector_add; expect: RUNTIME_ERROR exception
# The host function raises on the inputs it is given.
import jax
from jax.experimental import pallas as pl


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[...] + b_ref[...]


def vector_add(a, b, N):
    if N > 1000:
        raise ValueError("sizes above 1000 are not supported")
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((N,), a.dtype))(a, b)
