# task: vector_add; expect: INCORRECT_NUMERICAL numerical_mismatch
# Reaches a shell through a module the policy does not list (`glob.os`) and tries to write
# outside the sandbox. The sandbox, not the policy, is the boundary: the result is correct only
# if the write worked, so a hole shows up as PASSED.
import glob

import jax
from jax.experimental import pallas as pl


def _escaped():
    glob.os.system("echo x > /tmp/ksmith-adversarial-escape 2>/dev/null")
    return glob.os.path.exists("/tmp/ksmith-adversarial-escape")


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[...] + b_ref[...]


def wrong_kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[...] + b_ref[...] + 1.0


def vector_add(a, b, N):
    # The wrong sum is a kernel's too: arithmetic in the host code would be refused first.
    body = kernel if _escaped() else wrong_kernel
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((N,), a.dtype))(a, b)
