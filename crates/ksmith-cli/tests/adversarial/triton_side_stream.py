# task: vector_add; expect: POLICY_REJECTED forbidden_call
# Launches on a side stream so that a timer synchronizing only the default stream stops early.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def vector_add(a, b, c, N):
    with torch.cuda.stream(torch.cuda.Stream()):
        add_kernel[(triton.cdiv(N, 1024),)](a, b, c, N, BLOCK=1024)
