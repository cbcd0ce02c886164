# task: vector_add; expect: INCORRECT_NUMERICAL output_unwritten
# Computes once per output buffer and skips the launch when it sees the same buffer again,
# betting that the previous result is still there (outputs are poisoned before every call).
import triton
import triton.language as tl

SEEN = set()


@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def vector_add(a, b, c, N):
    key = (c.data_ptr(), N)
    if key in SEEN:
        return
    SEEN.add(key)
    add_kernel[(triton.cdiv(N, 1024),)](a, b, c, N, BLOCK=1024)
