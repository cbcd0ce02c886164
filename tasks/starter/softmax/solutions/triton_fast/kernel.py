"""Row softmax, bandwidth-oriented.

- Rows up to 16384 wide: the whole row lives in registers, so x is read from DRAM once
  and y written once (single pass: max, exp, sum, scale on the register copy).  Narrow
  rows are packed ROWS to a program (about 4096 elements per program) so that small N
  still gives each program enough work and loads in flight; warps scale with the tile.
- Wider rows: online softmax over 4096-wide chunks (running max and rescaled running
  sum in one sweep), then one sweep that writes exp(x - max) / sum: two reads instead
  of three.
"""
import triton
import triton.language as tl


@triton.jit
def _softmax_rows_kernel(x, y, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    v = tl.load(x + offs, mask=mask, other=float("-inf"))
    m = tl.max(v, axis=1)
    # rows past M are all -inf; keep them finite so no NaN is computed (they are not stored)
    m = tl.where(rows < M, m, 0.0)
    e = tl.exp(v - m[:, None])
    inv = 1.0 / tl.where(rows < M, tl.sum(e, axis=1), 1.0)
    tl.store(y + offs, e * inv[:, None], mask=mask)


@triton.jit
def _softmax_online_kernel(x, y, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * N
    yr = y + row * N
    cols = tl.arange(0, BLOCK_N)
    # sweep 1: running max m and sum s of exp(x - m), rescaled when m grows
    m = tl.full([1], float("-inf"), tl.float32)
    s = tl.zeros([1], tl.float32)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        v = tl.load(xr + c, mask=c < N, other=float("-inf"), eviction_policy="evict_last")
        m_new = tl.maximum(m, tl.max(v, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), axis=0)
        m = m_new
    inv = 1.0 / s
    # sweep 2: write (the row is usually still in L2)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        mask = c < N
        v = tl.load(xr + c, mask=mask, other=float("-inf"), eviction_policy="evict_first")
        tl.store(yr + c, tl.exp(v - m) * inv, mask=mask)


def softmax(x, y, M, N):
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N <= 16384:
        ROWS = max(1, min(4096 // BLOCK_N, triton.next_power_of_2(M)))
        tile = ROWS * BLOCK_N
        num_warps = 4 if tile <= 2048 else (8 if tile <= 4096 else 16)
        _softmax_rows_kernel[(triton.cdiv(M, ROWS),)](x, y, M, N, ROWS=ROWS, BLOCK_N=BLOCK_N, num_warps=num_warps)
    else:
        _softmax_online_kernel[(M,)](x, y, N, BLOCK_N=4096, num_warps=8)
