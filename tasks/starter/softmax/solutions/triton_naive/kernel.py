"""Row softmax: one program per row, three passes over the row in 1024-wide chunks
(max, sum of exp, write), each chunk masked at the end of the row."""
import triton
import triton.language as tl


@triton.jit
def _softmax_row_kernel(x, y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * N
    yr = y + row * N
    cols = tl.arange(0, BLOCK)

    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, N, BLOCK):
        c = start + cols
        v = tl.load(xr + c, mask=c < N, other=float("-inf"))
        m = tl.maximum(m, v)
    row_max = tl.max(m, axis=0)

    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        c = start + cols
        v = tl.load(xr + c, mask=c < N, other=float("-inf"))
        s += tl.exp(v - row_max)
    denom = tl.sum(s, axis=0)

    for start in range(0, N, BLOCK):
        c = start + cols
        mask = c < N
        v = tl.load(xr + c, mask=mask, other=float("-inf"))
        tl.store(yr + c, tl.exp(v - row_max) / denom, mask=mask)


def softmax(x, y, M, N):
    _softmax_row_kernel[(M,)](x, y, N, BLOCK=1024, num_warps=4)
