"""c = a @ b: one program per 32x32 output tile, accumulated as K rank-1 updates
(a column of a times a row of b per step) in float32 on the CUDA cores.  No shared-memory
staging, no tensor cores: every a/b element is reloaded by each tile that needs it."""
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a, b, c, M, K, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mmask = rm < M
    nmask = rn < N
    a_col = a + rm.to(tl.int64) * K
    b_row = b + rn
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K):
        av = tl.load(a_col + k, mask=mmask, other=0.0)
        bv = tl.load(b_row + k * N, mask=nmask, other=0.0)
        acc += av[:, None] * bv[None, :]
    offs = rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(c + offs, acc, mask=mmask[:, None] & nmask[None, :])


def matmul(a, b, c, M, K, N):
    BM, BN = 32, 32
    _matmul_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](a, b, c, M, K, N, BM=BM, BN=BN, num_warps=4)
