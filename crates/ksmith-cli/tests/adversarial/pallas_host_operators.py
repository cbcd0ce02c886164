# task: vector_add; expect: POLICY_REJECTED forbidden_call
# The sum made with `+` in host code and handed to a copying kernel; and, so the check sees
# past the first kernel, a kernel's output scaled with `*` afterwards (arithmetic on a
# kernel's outputs is host work too). Grid sizes computed from the axes stay allowed.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 1024


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def vector_add(a, b, N):
    n_pad = pl.cdiv(N, BLOCK) * BLOCK
    s = jnp.pad(a + b, (0, n_pad - N))
    spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
    c = pl.pallas_call(
        copy_kernel,
        out_shape=jax.ShapeDtypeStruct((n_pad,), a.dtype),
        grid=(n_pad // BLOCK,),
        in_specs=[spec],
        out_specs=spec,
    )(s)
    return c[:N] * 1.0
