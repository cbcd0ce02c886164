# task: vector_add; expect: INCORRECT_NUMERICAL output_unwritten
# Launches blocks for the first half only: the rest of c keeps the harness's poison.
import triton
import triton.language as tl


@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def vector_add(a, b, c, N):
    half = N // 2
    add_kernel[(triton.cdiv(half, 256),)](a, b, c, half, BLOCK=256)
