# task: vector_add; expect: PASSED
import jax
from jax.experimental import pallas as pl


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[...] + b_ref[...]


def vector_add(a, b, N):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((N,), a.dtype))(a, b)
