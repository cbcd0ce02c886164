# task: matmul; expect: POLICY_REJECTED forbidden_call
# A Pallas "matmul" whose kernel only copies: the product is a broadcast multiply and a sum in
# the host code around pallas_call (XLA does the work). No library-math name appears, so the
# AST policy passes it; the traced program outside the kernel shows `mul` and `reduce_sum` on
# the inputs.
import jax
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def matmul(a, b, M, K, N):
    c = (a[:, :, None] * b[None, :, :]).sum(1)
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct((M, N), a.dtype))(c)
