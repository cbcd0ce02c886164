"""RMSNorm, bandwidth-oriented.

- Rows up to 16384 wide: the whole row stays in registers (x read once, y written once);
  narrow rows are packed ROWS to a program (about 4096 elements per program) and w is
  loaded once per program and broadcast over its rows; warps scale with the tile.
- Wider rows: a chunked sum-of-squares sweep, then a scaling sweep (two reads of x).
"""
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows_kernel(x, w, y, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    mask = (rows[:, None] < M) & cmask[None, :]
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    v = tl.load(x + offs, mask=mask, other=0.0)
    g = tl.load(w + cols, mask=cmask, other=0.0)
    r = tl.rsqrt(tl.sum(v * v, axis=1) / N + 1e-6)
    tl.store(y + offs, v * r[:, None] * g[None, :], mask=mask)


@triton.jit
def _rmsnorm_looped_kernel(x, w, y, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * N
    yr = y + row * N
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        v = tl.load(xr + c, mask=c < N, other=0.0, eviction_policy="evict_last")
        acc += v * v
    r = tl.rsqrt(tl.sum(acc, axis=0) / N + 1e-6)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        mask = c < N
        v = tl.load(xr + c, mask=mask, other=0.0, eviction_policy="evict_first")
        g = tl.load(w + c, mask=mask, other=0.0)
        tl.store(yr + c, v * r * g, mask=mask)


def rmsnorm(x, w, y, M, N):
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N <= 16384:
        ROWS = max(1, min(4096 // BLOCK_N, triton.next_power_of_2(M)))
        tile = ROWS * BLOCK_N
        num_warps = 4 if tile <= 2048 else (8 if tile <= 4096 else 16)
        _rmsnorm_rows_kernel[(triton.cdiv(M, ROWS),)](x, w, y, M, N, ROWS=ROWS, BLOCK_N=BLOCK_N, num_warps=num_warps)
    else:
        _rmsnorm_looped_kernel[(M,)](x, w, y, N, BLOCK_N=4096, num_warps=8)
