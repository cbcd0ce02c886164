# task: vector_add; expect: INCORRECT_SHAPE output_shape
import jax
from jax.experimental import pallas as pl


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[1:] + b_ref[1:]


def vector_add(a, b, N):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((N - 1,), a.dtype))(a, b)
