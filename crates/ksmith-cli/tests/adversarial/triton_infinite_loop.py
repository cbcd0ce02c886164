# task: vector_add; expect: TIMEOUT wall_timeout
import triton
import triton.language as tl


@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = 0
    while i >= 0:  # never ends on the device
        i += 1
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def vector_add(a, b, c, N):
    add_kernel[(triton.cdiv(N, 1024),)](a, b, c, N, BLOCK=1024)
