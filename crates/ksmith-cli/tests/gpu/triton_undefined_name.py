"""c = a + b with a typo: `bb` is no name in the kernel, which Triton's compiler refuses."""

import triton
import triton.language as tl


@triton.jit
def _add(a, b, c, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(a + offs, mask=mask)
    y = tl.load(bb + offs, mask=mask)
    tl.store(c + offs, x + y, mask=mask)


def vector_add(a, b, c, N):
    _add[(triton.cdiv(N, 1024),)](a, b, c, N, BLOCK=1024)
