"""c = a + b: one program per 1024-element block, masked at the tail."""
import triton
import triton.language as tl


@triton.jit
def _add_kernel(a, b, c, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(a + offs, mask=mask)
    y = tl.load(b + offs, mask=mask)
    tl.store(c + offs, x + y, mask=mask)


def vector_add(a, b, c, N):
    BLOCK = 1024
    _add_kernel[(triton.cdiv(N, BLOCK),)](a, b, c, N, BLOCK=BLOCK, num_warps=4)
