# task: vector_add; expect: RUNTIME_ERROR signal_SIGSEGV
import triton
import triton.language as tl


@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m)
    # no mask on the store: the last block writes past the end of c, far past
    tl.store(c + offs * 4096, x)


def vector_add(a, b, c, N):
    add_kernel[(triton.cdiv(N, 1024),)](a, b, c, N, BLOCK=1024)
