"""c = a @ b on the tensor cores with float32 accuracy.

- 128x128 output tile per program (64x64 when the grid would leave most SMs idle),
  K swept in 16-deep slices through tl.dot; Triton stages the a/b slices in shared memory
  and software-pipelines the loads (num_stages).
- input_precision="tf32x3": each operand is split into a TF32 head and a TF32 tail and
  three TF32 MMAs are summed (a_hi b_hi + a_hi b_lo + a_lo b_hi) in float32: about
  2^-21 relative error per product, close to float32 FMA (plain TF32 would err ~1e-3
  and fail the tolerance), at tensor-core speed.
- Grouped program order (GROUP_M tile rows share each b column strip) keeps the working
  set in L2.
- Row/column indices of the loads wrap modulo M/N, so the main K loop runs without masks;
  a partial last K slice is done once after the loop with a mask; the store is masked.
"""
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a, b, c, M, K, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP_M * grid_n
    group = pid // width
    first_m = group * GROUP_M
    group_size = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % group_size
    pid_n = (pid % width) // group_size

    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    ra = tl.max_contiguous(tl.multiple_of(rm % M, BM), BM)
    rb = tl.max_contiguous(tl.multiple_of(rn % N, BN), BN)
    a_ptrs = a + ra[:, None].to(tl.int64) * K + rk[None, :]
    b_ptrs = b + rk[:, None].to(tl.int64) * N + rb[None, :]

    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K // BK):
        at = tl.load(a_ptrs)
        bt = tl.load(b_ptrs)
        acc = tl.dot(at, bt, acc, input_precision="tf32x3")
        a_ptrs += BK
        b_ptrs += BK * N
    if not EVEN_K:
        # the last, partial K slice: masked outside the pipelined loop
        kr = K % BK
        at = tl.load(a_ptrs, mask=rk[None, :] < kr, other=0.0)
        bt = tl.load(b_ptrs, mask=rk[:, None] < kr, other=0.0)
        acc = tl.dot(at, bt, acc, input_precision="tf32x3")

    offs = rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(c + offs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, c, M, K, N):
    # 128x128x16 tiles, 8 warps, 4 stages (64 KiB of shared memory) compile to wgmma
    # without register spills on sm_90 (tf32x3 triples the operand registers; BK = 32
    # spills).  Small problems: 64x64 tiles so that more of the 132 SMs get work.
    BM, BN, BK, num_warps, num_stages = 128, 128, 16, 8, 4
    if triton.cdiv(M, 128) * triton.cdiv(N, 128) < 132:
        BM, BN, BK, num_warps, num_stages = 64, 64, 32, 4, 3
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _matmul_kernel[grid](a, b, c, M, K, N, BM=BM, BN=BN, BK=BK, GROUP_M=8, EVEN_K=(K % BK == 0),
                         num_warps=num_warps, num_stages=num_stages)
