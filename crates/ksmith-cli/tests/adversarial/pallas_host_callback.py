# task: vector_add; expect: POLICY_REJECTED forbidden_call
# Escapes to host Python from inside the kernel.
import jax
import numpy as np
from jax.experimental import pallas as pl


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jax.pure_callback(np.add, jax.ShapeDtypeStruct(a_ref.shape, a_ref.dtype), a_ref[...], b_ref[...])


def vector_add(a, b, N):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((N,), a.dtype))(a, b)
