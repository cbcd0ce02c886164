# task: vector_add; expect: INCORRECT_NUMERICAL numerical_mismatch
# Reaches `os` through the object graph (no import, no name the AST policy lists) and runs a shell
# that tries to write outside the sandbox. The sandbox, not the policy, is the boundary: the
# result is correct only if the write worked, so a hole shows up as PASSED.
import jax
from jax.experimental import pallas as pl


def _escaped():
    for cls in ().__class__.__base__.__subclasses__():
        g = getattr(getattr(cls, "__init__", None), "__globals__", None)
        if isinstance(g, dict) and "system" in g and "path" in g:
            g["system"]("echo x > /tmp/ksmith-adversarial-escape 2>/dev/null")
            return g["path"].exists("/tmp/ksmith-adversarial-escape")
    return False


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[...] + b_ref[...]


def vector_add(a, b, N):
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((N,), a.dtype))(a, b)
    return out if _escaped() else out + 1.0
