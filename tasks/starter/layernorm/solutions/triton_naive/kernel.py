"""LayerNorm: one program per row, three passes over the row in 1024-wide chunks
(mean, variance of the centred values, normalise and apply gamma/beta)."""
import triton
import triton.language as tl


@triton.jit
def _layernorm_row_kernel(x, gamma, beta, y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * N
    yr = y + row * N
    cols = tl.arange(0, BLOCK)

    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        c = start + cols
        acc += tl.load(xr + c, mask=c < N, other=0.0)
    mean = tl.sum(acc, axis=0) / N

    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        c = start + cols
        mask = c < N
        d = tl.where(mask, tl.load(xr + c, mask=mask, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + 1e-5)

    for start in range(0, N, BLOCK):
        c = start + cols
        mask = c < N
        v = tl.load(xr + c, mask=mask, other=0.0)
        g = tl.load(gamma + c, mask=mask, other=0.0)
        b = tl.load(beta + c, mask=mask, other=0.0)
        tl.store(yr + c, (v - mean) * rstd * g + b, mask=mask)


def layernorm(x, gamma, beta, y, M, N):
    _layernorm_row_kernel[(M,)](x, gamma, beta, y, N, BLOCK=1024, num_warps=4)
