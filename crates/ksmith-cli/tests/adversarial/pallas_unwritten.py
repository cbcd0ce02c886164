# task: vector_add; expect: INCORRECT_NUMERICAL nan_in_output
# Writes the first half only (interpret mode fills unwritten output memory with NaN).
import jax
from jax.experimental import pallas as pl


def kernel(a_ref, b_ref, o_ref):
    half = a_ref.shape[0] // 2
    o_ref[:half] = a_ref[:half] + b_ref[:half]


def vector_add(a, b, N):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((N,), a.dtype))(a, b)
