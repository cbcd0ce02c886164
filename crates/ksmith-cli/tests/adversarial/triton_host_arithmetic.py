# task: matmul; expect: POLICY_REJECTED forbidden_call
# A Triton "matmul" whose kernel only copies: the host code computes the product with
# operators and `.sum()` on the task's tensors (torch would do the work on a GPU) and launches
# a copy. On the interpreter the harness's tensors compute nothing, and the arithmetic is
# reported as host compute (it used to fail as an exception).
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


def matmul(a, b, c, M, K, N):
    prod = (a[:, :, None] * b[None, :, :]).sum(1)
    copy_kernel[(triton.cdiv(M * N, 1024),)](prod, c, M * N, BLOCK=1024)
