# task: vector_add; expect: COMPILE_ERROR syntax_error line=8
import jax
from jax.experimental import pallas as pl


def kernel(a_ref, b_ref, o_ref):
    # a missing closing bracket on the next line
    o_ref[...] = a_ref[...] + b_ref[...
